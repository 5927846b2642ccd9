import 'reflect-metadata';
import autocannon from 'autocannon';
import { spawn, ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Knex } from 'knex';
import { benchCleanup, freshBenchDatabase } from '../benchDatabase';
import { startFakePegel, syntheticStations } from '../../test/helpers/fakePegel';
import { Fixtures, insertSessions, seedFixtures, tableCounts } from './fixtures';
import { storeCpu, storeCpuBetween } from '../storeCpu';
import { Credential, fillRoute, FilledRoute, readRouteTable, RouteEntry, UnfilledRoute } from './table';

/**
 * bench:routes — every GET of the api's route table that the fixtures can fill, and the main
 * writes, against one api process, interleaved with bare Koa in the same run. Prints req/s, p99,
 * SQL statements per request and the ratio to Koa per route, sorted from the slowest; exits 1 when
 * a route misses its target, answered anything but 2xx, or could not be probed.
 *
 *   npm run bench:routes
 *   DURATION=1 ROUNDS=1 ROWS=500 GPS_POINTS=20000 npm run bench:routes     (a quick run)
 *   ONLY='trips' npm run bench:routes                                       (routes matching a regex)
 *
 * Environment: DURATION (s per measured run, 5), WARMUP (s before each, 2), ROUNDS (3),
 * CONNECTIONS (50), ROWS (rows per table, 10000), GPS_POINTS (1000000), ONLY (regex on
 * "METHOD /path"), SAMPLE (distinct path values rotated per route, 100), TRACKERS (devices POST
 * /v1/gps rotates through, 1000), GPS_BATCH (points per POST /v1/gps/batch, 100), SESSION_POOL
 * (fresh sessions per DELETE /v1/sessions/{token} run, 30000), KOA_EVERY (cases between two Koa
 * runs, 4), ACCEPT_ENCODING (sent with every load request, 'gzip, deflate, br'; empty for none), KEEP_DB=1 (keep the database), RATE (a fixed offered load in req/s: CPU per request without saturation; off), PROFILE=<dir> (CPU profile of the api target), TARGET_NODE_ARGS (extra node flags for the api target), TARGET_LOG_LEVEL (api log level, silent), SURVIVORS=<file> (a sampling heap profile of what outlived a scavenge in the api target, bench/routes/target.ts),
 * DATABASE_URL / REDIS_URL (as for the service).
 *
 * How it measures:
 * - One api process (bench/routes/target.ts: the real startApi, with the node flags PM2 gives the
 *   api) and one bare Koa process serving a small JSON body, both started once. Rate limits are
 *   raised far above what the run sends, so every request is counted but none refused.
 * - Each round runs every case once, Koa every KOA_EVERY cases; a case's ratio in a round is its
 *   req/s over the mean of the two Koa runs around it (a slow stretch of the shared machine hits
 *   both). The table shows the median over rounds of ratio, req/s and p99.
 * - Each run has a warm-up (JIT, pools, credential cache, prepared statements), then the measured
 *   run. Throughput counts 2xx answers only; any non-2xx, error or timeout fails the route.
 * - Before loading, every concrete path of every GET (all rotated values) is requested once and
 *   must answer 2xx; its body classifies the route (a list returns an array, `data` as one, or one
 *   array beside page or total fields, as the audit lists' `events`).
 * - SQL statements per request: the api process counts every statement it sends (pg driver level),
 *   read before and after each measured run, less the idle rate (the outbox relay's polling)
 *   measured before the first round, divided by the requests answered.
 * - Writes delete what they created after each run (rows created since the run started), so every
 *   round's reads see the seeded table sizes.
 */
const num = (name: string, def: number) => {
  const v = process.env[name];
  const n = v === undefined || v === '' ? def : Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got ${v}`);
  return n;
};
const DURATION = num('DURATION', 5);
const WARMUP = num('WARMUP', 2);
const ROUNDS = Math.max(1, Math.floor(num('ROUNDS', 3)));
const CONNECTIONS = Math.max(1, Math.floor(num('CONNECTIONS', 50)));
const ROWS = Math.max(10, Math.floor(num('ROWS', 10_000)));
const GPS_POINTS = Math.max(ROWS, Math.floor(num('GPS_POINTS', 1_000_000)));
const SAMPLE = Math.max(1, Math.floor(num('SAMPLE', 100)));
const TRACKERS = Math.max(1, Math.min(ROWS, Math.floor(num('TRACKERS', 1000))));
const GPS_BATCH = Math.max(1, Math.floor(num('GPS_BATCH', 100)));
const SESSION_POOL = Math.max(CONNECTIONS * 4, Math.floor(num('SESSION_POOL', 30_000)));
/** Stations the fake PEGELONLINE lists besides its few named ones: about as many as the real one. */
const PEGEL_STATIONS = Math.floor(num('PEGEL_STATIONS', 700));
const KOA_EVERY = Math.max(1, Math.floor(num('KOA_EVERY', 4)));
/** RATE=<req/s>: a fixed offered load instead of as fast as it goes (CPU per request without saturation). */
const RATE = process.env.RATE ? Math.max(1, num('RATE', 0)) : undefined;
const ONLY = process.env.ONLY ? new RegExp(process.env.ONLY) : undefined;
/**
 * The Accept-Encoding every load request sends: what browsers, fetch and mobile HTTP stacks send
 * by default. ACCEPT_ENCODING= (empty) measures uncompressed answers, as a client that asks for
 * none gets them.
 */
const ACCEPT_ENCODING = process.env.ACCEPT_ENCODING ?? 'gzip, deflate, br';
/** Wait after a measured run before reading the statement count: the outbox relay's pass (10 ms after a write) lands in it. */
const SETTLE_MS = 300;
/** Idle time over which the background statement rate is measured. */
const BASELINE_MS = 4000;

const TARGET = path.resolve(__dirname, 'target.js');
/** Node flags of the api in production (ecosystem.config.js), given to both targets alike. */
const NODE_ARGS: string[] = (
  (
    createRequire(__filename)(path.resolve(__dirname, '..', '..', '..', 'ecosystem.config.js')) as {
      apps: Array<{ name: string; node_args?: string }>;
    }
  ).apps.find((a) => a.name === 'api')?.node_args ?? ''
)
  .split(/\s+/)
  .filter(Boolean);

/** Targets of the issue: single-resource GETs, lists at their default limit, the 1M-point list, single-point ingest. */
const SINGLE_MIN_RATIO = 0.35;
const SINGLE_MAX_P99 = 20;
const LIST_MIN_RATIO = 0.2;
const LIST_MIN_RATIO_FOR: Record<string, number> = { 'GET /v1/gps': 0.1 };
const GPS_MIN_POINTS_PER_S = 8000;

const log = (s: string) => process.stderr.write(`${s}\n`);

/**
 * autocannon 9 appends every chunk of every answer to a string (`req.body += chunk`, a UTF-8
 * decode), for `expectBody`, `verifyBody` and `onResponse`, none of which this benchmark uses. On
 * answers of megabytes, or of compressed bytes (which decode slowly as UTF-8: one connection
 * fetched the same 26 KB of brotli at 1,475 answers/s with the decode and 5,646 without), the load
 * generator then spent more CPU per answer than the api, sharing the api's two cores, and the
 * figures measured the client. Bytes are still counted (autocannon counts them as they arrive).
 */
(
  createRequire(__filename)('autocannon/lib/pipelinedRequestsQueue') as { prototype: { addBody(data: Buffer): void } }
).prototype.addBody = () => undefined;

interface Target {
  kind: 'api' | 'koa';
  child: ChildProcess;
  port: number;
  countPort: number;
}

function startTarget(kind: 'api' | 'koa', env: Record<string, string>): Promise<Target> {
  return new Promise((resolve, reject) => {
    // PROFILE=<dir>: the api target writes a V8 CPU profile there when it exits (node --cpu-prof).
    const profile =
      process.env.PROFILE && kind !== 'koa' ? ['--cpu-prof', `--cpu-prof-dir=${process.env.PROFILE}`] : [];
    // TARGET_NODE_ARGS: extra node flags for the api target (--trace-gc, say), space-separated.
    if (kind !== 'koa' && process.env.TARGET_NODE_ARGS)
      profile.push(...process.env.TARGET_NODE_ARGS.split(/\s+/).filter(Boolean));
    const child = spawn(process.execPath, [...NODE_ARGS, ...profile, TARGET, kind], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    let ready = false;
    child.stdout!.on('data', (d) => {
      // After READY, whatever the target prints (warnings) goes to our stderr.
      if (ready) return void process.stderr.write(d);
      out += d;
      const m = /READY (\d+) (\d+)/.exec(out);
      if (m) {
        ready = true;
        resolve({ kind, child, port: Number(m[1]), countPort: Number(m[2]) });
      }
    });
    child.on('exit', (code, signal) => {
      reject(new Error(`${kind} target exited (${code ?? signal})`));
      if (!stopping) {
        log(`${kind} target exited unexpectedly (${code ?? signal}): the run is void`);
        void cleanupRun().finally(() => process.exit(1));
      }
    });
  });
}
let stopping = false;
/** Stops the targets and drops the run's database and Redis keys (set once main has them). */
let cleanupRun: () => Promise<void> = async () => undefined;

/** SIGTERM, then SIGKILL if the target has not exited within 10 s. */
function stopTarget(t: Target): Promise<void> {
  if (t.child.exitCode !== null || t.child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => t.child.kill('SIGKILL'), 10_000);
    t.child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    t.child.kill('SIGTERM');
  });
}

/** What a target has counted so far (bench/routes/target.ts). */
interface Counters {
  statements: number;
  cpuMicros: number;
  loopActiveMs: number;
  loopIdleMs: number;
}

async function counters(t: Target): Promise<Counters> {
  const res = await fetch(`http://127.0.0.1:${t.countPort}/`);
  return (await res.json()) as Counters;
}

/** The share of the time between two readings that the target's event loop was busy (0–1). */
function loopBusy(before: Counters, after: Counters): number | undefined {
  const active = after.loopActiveMs - before.loopActiveMs;
  const total = active + after.loopIdleMs - before.loopIdleMs;
  return total > 0 ? active / total : undefined;
}

/** A run's CPU per request and event-loop load for the log. */
const cpu = (r: Run) =>
  `${r.cpuPerRequest !== undefined ? r.cpuPerRequest.toFixed(1) : '—'} µs CPU/req` +
  (r.storeCpuPerRequest !== undefined ? ` (+ ${r.storeCpuPerRequest.toFixed(0)} µs stores)` : '') +
  `, loop ${loopPct(r.loopBusy)}`;
const loopPct = (x: number | undefined) => (x !== undefined ? `${Math.round(x * 100)}%` : '—');
/** The median of a measure over the runs that have it. */
function medianOf(runs: readonly Run[], pick: (r: Run) => number | undefined): number | undefined {
  const xs = runs.flatMap((r) => {
    const x = pick(r);
    return x !== undefined ? [x] : [];
  });
  return xs.length ? median(xs) : undefined;
}
const medianCpu = (runs: readonly Run[]) => medianOf(runs, (r) => r.cpuPerRequest);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const authHeader = (c: Credential): Record<string, string> =>
  c.kind === 'none' ? {} : { authorization: `Bearer ${c.token}` };

type Request = {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: string;
  setupRequest?: (r: any, context?: any) => any;
};

interface RunSpec {
  /** Requests each connection cycles through (prebuilt), or one with setupRequest. */
  requests: Request[];
  headers?: Record<string, string>;
  /** Upper bound of requests in this run (a pool of single-use values). */
  maxRequests?: number;
}

interface Run {
  ok: number;
  total: number;
  non2xx: number;
  errors: number;
  statusCodes: Record<string, number>;
  seconds: number;
  rps: number;
  p99: number;
  /** Bytes received per answer, headers included (compressed as sent). */
  bytesPerAnswer: number;
  statements?: number;
  /** The target process's CPU time (user + system) per request answered, in µs. */
  cpuPerRequest?: number;
  /** PostgreSQL's and Redis's CPU time per request answered, in µs (bench/storeCpu.ts). */
  storeCpuPerRequest?: number;
  /** The share of the measured run the target's event loop was busy (0–1). */
  loopBusy?: number;
}

/** A list registered by `staggered`: where its next connection starts, and its built requests. */
interface Stagger {
  started: number;
  stride: number;
  buffers?: Buffer[];
}
/**
 * Carried by the first request of a registered list. autocannon copies the list for every
 * connection (lodash cloneDeep, which keeps symbol keys and shares functions), so the mark is a
 * function: every connection's copy reaches the one Stagger of the run.
 */
const STAGGER = Symbol('stagger');

/**
 * autocannon gives every connection the same list of requests from its first entry, so the
 * connections would ask for the same value at the same moment (one id, one tracker key) all run
 * long: one device's points in every group commit, one id in every batched read, answers shared
 * within a turn. Real clients ask for different values at once. For a list registered by
 * `staggered`, each connection's iterator starts at its own place instead, the places spread evenly
 * over the list, and the list's request buffers are built once for all connections (autocannon
 * builds them once per connection). A per-request setupRequest would do the same but rebuild every
 * request's buffer as it is sent (headers joined, body copied, an id drawn): about 20 µs of the
 * load generator's CPU per request, on the cores the api shares, that bare Koa (one request,
 * prebuilt) never pays.
 */
type Built = Request & { requestBuffer?: Buffer; [STAGGER]?: () => Stagger };
type Iterator = {
  requests: Built[];
  currentRequestIndex: number;
  currentRequest: Built;
  resetted: boolean;
  setRequests(requests: Built[]): void;
};
{
  const iterator = (createRequire(__filename)('autocannon/lib/requestIterator') as { prototype: Iterator }).prototype;
  const setRequests = iterator.setRequests;
  iterator.setRequests = function staggeredSetRequests(this: Iterator, requests: Built[]) {
    const s = requests?.[0]?.[STAGGER]?.();
    if (!s) return setRequests.call(this, requests);
    // Every connection of a run has the same list and builder defaults: one build serves all.
    if (s.buffers) {
      const buffers = s.buffers;
      requests.forEach((r, i) => (r.requestBuffer = buffers[i]));
      this.resetted = false;
      this.requests = requests;
    } else {
      setRequests.call(this, requests);
      s.buffers = requests.map((r) => r.requestBuffer!);
    }
    this.currentRequestIndex = (s.started++ * s.stride) % requests.length;
    this.currentRequest = requests[this.currentRequestIndex];
  };
}

/** The requests of a run, registered so each connection starts at its own place (see above). */
function staggered(requests: Request[]): Request[] {
  const n = requests.length;
  if (n < 2 || requests.some((r) => r.setupRequest)) return requests;
  const stagger: Stagger = { started: 0, stride: Math.max(1, Math.floor(n / CONNECTIONS)) };
  return [{ ...requests[0], [STAGGER]: () => stagger } as Built, ...requests.slice(1)];
}

async function cannon(url: string, spec: RunSpec, seconds: number): Promise<autocannon.Result> {
  const opts: autocannon.Options = {
    url,
    connections: CONNECTIONS,
    duration: seconds,
    headers: ACCEPT_ENCODING ? { 'accept-encoding': ACCEPT_ENCODING, ...spec.headers } : spec.headers,
    requests: staggered(spec.requests) as autocannon.Request[],
  };
  if (RATE) opts.overallRate = RATE;
  if (spec.maxRequests !== undefined) opts.maxOverallRequests = Math.max(spec.maxRequests, CONNECTIONS);
  return autocannon(opts);
}

function summarise(r: autocannon.Result): Run {
  const statusCodes: Record<string, number> = {};
  for (const [code, s] of Object.entries(
    (r as unknown as { statusCodeStats: Record<string, { count: number }> }).statusCodeStats ?? {},
  ))
    statusCodes[code] = s.count;
  const seconds = r.duration || DURATION;
  return {
    ok: r['2xx'],
    total: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    statusCodes,
    seconds,
    rps: r['2xx'] / seconds,
    p99: r.latency.p99,
    bytesPerAnswer: r.requests.total ? r.throughput.total / r.requests.total : 0,
  };
}

/**
 * Waits until the target answers a cheap request quickly again (at most 60 s): after a run of
 * multi-megabyte answers the api may still be writing queued responses when autocannon stops,
 * and the next case would otherwise be measured against that backlog.
 */
async function quiesce(url: string): Promise<void> {
  const until = Date.now() + 60_000;
  while (Date.now() < until) {
    const t0 = performance.now();
    await fetch(`${url}/v1`).then(
      (r) => r.arrayBuffer(),
      () => undefined,
    );
    if (performance.now() - t0 < 20) return;
    await sleep(200);
  }
}

/** Warm-up, then a measured run with the api's statement count read around it. */
async function measure(target: Target, spec: () => RunSpec, baselinePerMs: number): Promise<Run> {
  const url = `http://127.0.0.1:${target.port}`;
  await quiesce(url);
  if (WARMUP > 0) {
    const w = spec();
    // A pool of single-use values: the warm-up may take a quarter of what is left.
    if (w.maxRequests !== undefined) w.maxRequests = Math.floor(w.maxRequests / 4);
    await cannon(url, w, WARMUP);
  }
  const s = spec();
  if (s.maxRequests !== undefined && s.maxRequests < CONNECTIONS)
    throw new Error('pool of single-use values exhausted by the warm-up');
  const before = await counters(target);
  const storesBefore = storeCpu();
  const t0 = Date.now();
  const run = summarise(await cannon(url, s, DURATION));
  const storesAfter = storeCpu();
  const after = await counters(target);
  if (run.total) run.cpuPerRequest = (after.cpuMicros - before.cpuMicros) / run.total;
  const stores = storeCpuBetween(storesBefore, storesAfter);
  if (run.total && stores !== undefined) run.storeCpuPerRequest = stores / run.total;
  run.loopBusy = loopBusy(before, after);
  if (target.kind === 'api') {
    await sleep(SETTLE_MS);
    const delta = (await counters(target)).statements - before.statements;
    run.statements = Math.max(0, delta - baselinePerMs * (Date.now() - t0));
  }
  return run;
}

interface Target_ {
  text: string;
  check(ratio: number, p99: number, pointsPerSecond: number): string | undefined;
}

interface Case {
  label: string;
  kind: 'single' | 'list' | 'write';
  detail: string;
  credential: string;
  target?: Target_;
  pointsPerRequest?: number;
  spec: () => RunSpec;
  /** Before each warm-up (a pool of single-use values). */
  prepare?: () => Promise<void>;
  /** Writes: delete rows created from the start of their run on. */
  cleanup?: boolean;
  probeFailure?: string;
  runs: Array<Run & { ratio: number }>;
}

function singleTarget(): Target_ {
  return {
    text: `≥ ${SINGLE_MIN_RATIO}× Koa, p99 ≤ ${SINGLE_MAX_P99} ms`,
    check: (ratio, p99) =>
      [
        ratio < SINGLE_MIN_RATIO ? `${ratio.toFixed(2)}× < ${SINGLE_MIN_RATIO}×` : '',
        p99 > SINGLE_MAX_P99 ? `p99 ${p99} ms > ${SINGLE_MAX_P99} ms` : '',
      ]
        .filter(Boolean)
        .join(', ') || undefined,
  };
}
function listTarget(min: number): Target_ {
  return {
    text: `≥ ${min.toFixed(2)}× Koa`,
    check: (ratio) => (ratio < min ? `${ratio.toFixed(2)}× < ${min.toFixed(2)}×` : undefined),
  };
}

/** One request of a GET, kept for the report when it is not 2xx. */
async function probeGet(
  base: string,
  p: string,
  headers: Record<string, string>,
): Promise<{ status: number; list?: number; type: string; error?: string }> {
  try {
    const res = await fetch(base + p, { headers });
    const type = res.headers.get('content-type') ?? '';
    const text = await res.text();
    if (res.status < 200 || res.status >= 300)
      return { status: res.status, type, error: `${res.status} ${text.slice(0, 160).replace(/\s+/g, ' ')}` };
    if (!type.includes('json')) return { status: res.status, type };
    const body = JSON.parse(text) as unknown;
    if (Array.isArray(body)) return { status: res.status, type, list: body.length };
    const data = (body as { data?: unknown }).data;
    if (Array.isArray(data)) return { status: res.status, type, list: data.length };
    // A page under another name (the audit lists' `events`): one array beside page or total fields.
    const fields = body !== null && typeof body === 'object' ? (body as Record<string, unknown>) : {};
    const arrays = Object.values(fields).filter((v): v is unknown[] => Array.isArray(v));
    const paged = ['page', 'limit', 'total', 'total_count', 'pagination'].some((k) => k in fields);
    if (arrays.length === 1 && paged) return { status: res.status, type, list: arrays[0].length };
    return { status: res.status, type };
  } catch (err) {
    return { status: 0, type: '', error: String((err as Error).message ?? err) };
  }
}

async function inBatches<T, R>(items: T[], width: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += width) out.push(...(await Promise.all(items.slice(i, i + width).map(fn))));
  return out;
}

/** Probes every concrete path of a GET once; classifies the route from the answers. */
async function getCase(base: string, f: FilledRoute): Promise<Case> {
  const e = f.entry;
  const label = `${e.method} ${e.path}`;
  const headers = authHeader(f.credential);
  const probes = await inBatches(f.paths, 8, (p) => probeGet(base, p, headers));
  const failed = probes.map((r, i) => ({ r, p: f.paths[i] })).filter(({ r }) => r.error);
  const lists = probes.filter((r) => r.list !== undefined);
  const kind: Case['kind'] = lists.length ? 'list' : 'single';
  const rows = lists.map((r) => r.list!);
  let detail = kind === 'list' ? `list, ${Math.min(...rows)}–${Math.max(...rows)} items` : 'single';
  if (kind === 'list' && Math.min(...rows) === Math.max(...rows)) detail = `list, ${rows[0]} items`;
  if (kind === 'list' && Math.max(...rows) === 0) detail += ' (EMPTY: fixtures do not fill it)';
  if (!probes[0].type.includes('json') && !failed.length)
    detail += ` (${probes[0].type.split(';')[0] || 'no content type'})`;
  const min = LIST_MIN_RATIO_FOR[label] ?? LIST_MIN_RATIO;
  const c: Case = {
    label,
    kind,
    detail: f.paths.length > 1 ? `${detail}; ${f.paths.length} values rotated` : detail,
    credential: f.credential.kind === 'none' ? 'anonymous' : f.credential.label,
    target: kind === 'single' ? singleTarget() : listTarget(min),
    spec: () => ({ requests: f.paths.map((p) => ({ method: 'GET', path: p })), headers }),
    runs: [],
  };
  if (failed.length)
    c.probeFailure = `${failed.length}/${f.paths.length} paths not 2xx, e.g. ${failed[0].p}: ${failed[0].r.error}`;
  return c;
}

function gpsPoint(i: number, now: number) {
  return {
    latitude: 52.5 + (i % 1000) / 100_000,
    longitude: 13.4 + (i % 997) / 100_000,
    altitude: 34,
    heading: i % 360,
    timestamp: now - (i % 600),
    speed_kmh: 36,
    speed_mps: 10,
    speed_mph: 22.37,
    speed_knots: 19.44,
    hdop: 0.9,
  };
}

/** The GraphQL read of the POST /v1/gql case (docs/graphql.md's example, at a page of 100). */
const GQL_TRIPS_PAGE = `{ trips(limit: 100) { pagination { total totalPages } data {
  id name status weightKg createdAt
  gpsPoints(first: 20) { nodes { latitude longitude timestamp } pageInfo { hasNextPage endCursor } }
  history { oldStatus newStatus changedAt } } } }`;

/** The main writes, with bodies made from the fixtures (the issue names them), and a GraphQL read. */
function writeCases(
  f: Fixtures,
  systemKey: string,
  db: Knex,
  table: RouteEntry[],
): { cases: Case[]; missing: UnfilledRoute[] } {
  const now = Math.floor(Date.now() / 1000);
  const json = { 'content-type': 'application/json' };
  const session = { authorization: `Bearer ${f.adminToken}`, ...json };
  const system = { authorization: `Bearer ${systemKey}`, ...json };
  const s = f.sample;
  let pool: string[] = [];
  let next = 0;
  const defs: Array<{
    method: Request['method'];
    path: string;
    detail: string;
    credential: string;
    pointsPerRequest?: number;
    target?: Target_;
    spec: () => RunSpec;
    prepare?: () => Promise<void>;
  }> = [
    {
      method: 'POST',
      path: '/v1/gps',
      detail: `write, 1 point per request, ${f.trackerKeys.length} devices (tracker keys) in turn`,
      credential: 'tracker API keys',
      pointsPerRequest: 1,
      target: {
        text: `≥ ${GPS_MIN_POINTS_PER_S.toLocaleString('en-US')} points/s`,
        check: (_r, _p, pps) =>
          pps < GPS_MIN_POINTS_PER_S ? `${Math.round(pps)} points/s < ${GPS_MIN_POINTS_PER_S}` : undefined,
      },
      spec: () => ({
        requests: f.trackerKeys.map((k, i) => ({
          method: 'POST',
          path: '/v1/gps',
          headers: { authorization: `Bearer ${k}`, ...json },
          body: JSON.stringify(gpsPoint(i, now)),
        })),
      }),
    },
    {
      method: 'POST',
      path: '/v1/gps/batch',
      detail: `write, ${GPS_BATCH} points per request, ${Math.min(100, f.trackerKeys.length)} devices in turn`,
      credential: 'tracker API keys',
      pointsPerRequest: GPS_BATCH,
      spec: () => ({
        requests: f.trackerKeys.slice(0, 100).map((k, d) => ({
          method: 'POST',
          path: '/v1/gps/batch',
          headers: { authorization: `Bearer ${k}`, ...json },
          body: JSON.stringify({
            points: Array.from({ length: GPS_BATCH }, (_, i) => gpsPoint(d * GPS_BATCH + i, now)),
          }),
        })),
      }),
    },
    {
      method: 'POST',
      path: '/v1/trips',
      detail: 'write, new draft trip with category, origin, destination',
      credential: 'session (super admin)',
      spec: () => ({
        requests: s.categories.map((c, i) => ({
          method: 'POST',
          path: '/v1/trips',
          headers: session,
          body: JSON.stringify({
            name: `bench new trip ${i}`,
            description: 'created by bench:routes',
            category_id: c,
            origin_id: s.locations[i % s.locations.length],
            destination_id: s.locations[(i + 1) % s.locations.length],
            weight_kg: 1200,
            tags: ['bench'],
          }),
        })),
      }),
    },
    {
      method: 'PATCH',
      path: '/v1/trips/:id',
      detail: `write, notes of ${s.trips.length} trips in turn`,
      credential: 'session (super admin)',
      // Twice the trips, so a trip's notes change from one visit to the next.
      spec: () => ({
        requests: [...s.trips, ...s.trips].map((id, i) => ({
          method: 'PATCH',
          path: `/v1/trips/${id}`,
          headers: session,
          body: JSON.stringify({ notes: `bench note ${i}` }),
        })),
      }),
    },
    {
      method: 'POST',
      path: '/v1/sessions',
      detail: `write, session for ${s.users.length} users in turn`,
      credential: 'system key',
      spec: () => ({
        requests: s.users.map((u) => ({
          method: 'POST',
          path: '/v1/sessions',
          headers: system,
          body: JSON.stringify({ userId: u, expires: new Date(Date.now() + 86_400_000).toISOString() }),
        })),
      }),
    },
    {
      method: 'DELETE',
      path: '/v1/sessions/:token',
      detail: `write, each request a fresh session (pool of ${SESSION_POOL} per run, warm-up included)`,
      credential: 'system key',
      prepare: async () => {
        const users = Array.from({ length: SESSION_POOL }, (_, i) => s.users[i % s.users.length]);
        pool = await insertSessions(db, users);
        next = 0;
      },
      spec: () => ({
        requests: [
          {
            method: 'DELETE',
            path: `/v1/sessions/${pool[next]}`,
            headers: { authorization: `Bearer ${systemKey}` },
            // Each request takes the next unused token; past the pool's end the path 404s (counted).
            setupRequest: (req: Request) => ({ ...req, path: `/v1/sessions/${pool[next++] ?? 'sess_pool_exhausted'}` }),
          },
        ],
        maxRequests: pool.length - next,
      }),
    },
    {
      // Not a write: GraphQL's reads are POSTs. A page of trips with nested lists is the kind of
      // operation GraphQL exists for, and the one a GET of the route table cannot show.
      method: 'POST',
      path: '/v1/gql',
      detail: 'read (GraphQL): a page of 100 trips, each with its first 20 points and its status history',
      credential: 'session (super admin)',
      spec: () => ({
        requests: [
          {
            method: 'POST',
            path: '/v1/gql',
            headers: session,
            body: JSON.stringify({ query: GQL_TRIPS_PAGE }),
          },
        ],
      }),
    },
    {
      method: 'POST',
      path: '/v1/devices',
      detail: 'write, new device',
      credential: 'session (super admin)',
      spec: () => ({
        requests: Array.from({ length: 10 }, (_, i) => ({
          method: 'POST',
          path: '/v1/devices',
          headers: session,
          body: JSON.stringify({
            name: `bench new device ${i}`,
            description: 'created by bench:routes',
            device_type: 'tracker',
          }),
        })),
      }),
    },
  ];
  const cases: Case[] = [];
  const missing: UnfilledRoute[] = [];
  for (const d of defs) {
    const label = `${d.method} ${d.path}`;
    if (ONLY && !ONLY.test(label)) continue;
    const entry = table.find((e) => e.method === d.method && e.path === d.path);
    if (!entry) {
      missing.push({
        entry: { method: d.method, path: d.path, auth: 'undocumented', requiredQuery: [] },
        reason: 'not in the route table any more',
      });
      continue;
    }
    cases.push({
      label,
      kind: 'write',
      detail: d.detail,
      credential: d.credential,
      pointsPerRequest: d.pointsPerRequest,
      target: d.target,
      spec: d.spec,
      prepare: d.prepare,
      cleanup: true,
      runs: [],
    });
  }
  return { cases, missing };
}

/** Sends a write's first request once: it must answer 2xx. */
async function probeWrite(base: string, c: Case): Promise<void> {
  await c.prepare?.();
  const spec = c.spec();
  const r = spec.requests[0];
  const req = r.setupRequest ? r.setupRequest({ ...r }) : r;
  try {
    const res = await fetch(base + req.path, {
      method: req.method,
      headers: { ...(spec.headers ?? {}), ...(req.headers ?? {}) },
      body: req.body,
    });
    const text = await res.text();
    if (res.status < 200 || res.status >= 300)
      c.probeFailure = `${req.method} ${req.path.slice(0, 60)}: ${res.status} ${text.slice(0, 160).replace(/\s+/g, ' ')}`;
    // GraphQL answers a failed field with 200 and `errors`.
    else if (req.path === '/v1/gql' && (JSON.parse(text) as { errors?: unknown }).errors)
      c.probeFailure = `POST /v1/gql answered errors: ${text.slice(0, 160)}`;
  } catch (err) {
    c.probeFailure = String((err as Error).message ?? err);
  }
}

/** Removes what a write created since `mark` (database time), so later reads see the seeded sizes. */
async function removeCreatedSince(db: Knex, mark: Date): Promise<void> {
  await db('gps_points').where('created_at', '>=', mark).delete();
  await db('trips').where('created_at', '>=', mark).delete();
  await db('devices').where('created_at', '>=', mark).delete();
  await db('sessions').where('created_at', '>=', mark).delete();
  await db('audit_events').where('created_at', '>=', mark).delete();
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
/** KB with the precision that matters: 0.31, 4.2, 757. */
const kbText = (kb: number) => (kb < 1 ? kb.toFixed(2) : kb < 10 ? kb.toFixed(1) : fmt(kb));

async function main(): Promise<void> {
  // The water-level provider is outside (PEGELONLINE): a local fake in its real format, so the
  // /v1/pegel routes are measured as served from the shared cache.
  const pegel = await startFakePegel();
  pegel.stations.push(...syntheticStations(PEGEL_STATIONS));
  const settings: Record<string, string> = {
    PEGEL_API_URL: pegel.url,
    NODE_ENV: 'production',
    SECRETS_KEY: randomBytes(32).toString('base64'),
    REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379',
    REDIS_PREFIX: `bench-routes:${randomBytes(4).toString('hex')}:`,
    SYSTEM_API_KEY: `bench-system-${randomBytes(16).toString('hex')}`,
    LOG_LEVEL: process.env.TARGET_LOG_LEVEL || 'silent',
    DRAIN_TIMEOUT_MS: '2000',
    // Limits far above what the run sends, so every request is counted but none refused.
    RATE_LIMIT_ANONYMOUS: '1000000000',
    RATE_LIMIT_USER: '1000000000',
    RATE_LIMIT_API_KEY: '1000000000',
    RATE_LIMIT_GPS_POST: '1000000000',
  };
  const systemKey = settings.SYSTEM_API_KEY;
  log(`seeding a fresh database: ROWS=${ROWS} per table, GPS_POINTS=${GPS_POINTS}`);
  const t0 = Date.now();
  const { url: databaseUrl, db } = await freshBenchDatabase('bench_routes', settings);
  const targets: Target[] = [];
  const cleanup = benchCleanup(
    { url: databaseUrl, redisUrl: settings.REDIS_URL, redisPrefix: settings.REDIS_PREFIX },
    async () => {
      stopping = true;
      // The api drains and closes its pools before its database is dropped.
      await Promise.all(targets.map((t) => stopTarget(t)));
      await pegel.close();
    },
  );
  cleanupRun = cleanup;

  let exitCode = 0;
  try {
    const fixtures = await seedFixtures(
      db,
      { rows: ROWS, gpsPoints: GPS_POINTS, sample: SAMPLE, trackers: TRACKERS },
      log,
    );
    log(
      `seeded in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${Object.entries(fixtures.counts)
        .map(([t, n]) => `${t} ${n}`)
        .join(', ')}`,
    );

    const table = await readRouteTable({ ...process.env, ...settings, DATABASE_URL: databaseUrl });
    const gets = table.filter((e) => e.method === 'GET');
    log(`route table: ${table.length} routes, ${gets.length} GET`);

    const api = await startTarget('api', { ...settings, DATABASE_URL: databaseUrl });
    targets.push(api);
    const koa = await startTarget('koa', {});
    targets.push(koa);
    const base = `http://127.0.0.1:${api.port}`;
    // As the api left them at its start (it adds the system key): what every round must read.
    const seeded = await tableCounts(db);

    // Background statements (outbox relay polling) while nothing is asked of the api.
    await sleep(1000);
    const idle0 = (await counters(api)).statements;
    await sleep(BASELINE_MS);
    const baselinePerMs = ((await counters(api)).statements - idle0) / BASELINE_MS;
    log(`idle statement rate of the api process: ${(baselinePerMs * 1000).toFixed(1)}/s (subtracted)`);

    const unfilled: UnfilledRoute[] = [];
    const cases: Case[] = [];
    log('probing every GET path once…');
    for (const e of gets) {
      if (ONLY && !ONLY.test(`${e.method} ${e.path}`)) continue;
      const filled = fillRoute(e, fixtures, systemKey, SAMPLE);
      if ('reason' in filled) {
        unfilled.push(filled);
        continue;
      }
      cases.push(await getCase(base, filled));
    }
    const writes = writeCases(fixtures, systemKey, db, table);
    unfilled.push(...writes.missing);
    for (const c of writes.cases) {
      const mark = (await db.raw<{ rows: Array<{ now: Date }> }>('SELECT now() AS now')).rows[0].now;
      await probeWrite(base, c);
      await removeCreatedSince(db, mark);
      cases.push(c);
    }
    const loadable = cases.filter((c) => !c.probeFailure);
    for (const c of cases.filter((x) => x.probeFailure)) log(`PROBE FAILED ${c.label}: ${c.probeFailure}`);
    log(
      `${loadable.length} cases to load (${cases.length - loadable.length} failed their probe, ${unfilled.length} cannot be filled); ${ROUNDS} rounds of ${DURATION} s (+${WARMUP} s warm-up) each`,
    );

    const koaRuns: Run[][] = [];
    const koaSpec = (): RunSpec => ({ requests: [{ method: 'GET', path: '/' }] });
    for (let round = 1; round <= ROUNDS; round++) {
      const koaThisRound: Run[] = [];
      const pending: Array<{ c: Case; run: Run; koaBefore: number }> = [];
      const runKoa = async () => {
        const r = await measure(koa, koaSpec, 0);
        koaThisRound.push(r);
        log(`round ${round}/${ROUNDS} Koa: ${fmt(r.rps)} req/s, p99 ${r.p99} ms, ${cpu(r)}`);
        // Cases since the previous Koa run take the mean of the Koa runs around them.
        for (const p of pending.splice(0)) {
          const ref = (p.koaBefore + r.rps) / 2;
          p.c.runs.push({ ...p.run, ratio: p.run.rps / ref });
        }
      };
      for (const [i, c] of loadable.entries()) {
        if (i % KOA_EVERY === 0) await runKoa();
        let mark: Date | undefined;
        if (c.cleanup) mark = (await db.raw<{ rows: Array<{ now: Date }> }>('SELECT now() AS now')).rows[0].now;
        try {
          await c.prepare?.();
          const run = await measure(api, c.spec, baselinePerMs);
          pending.push({ c, run, koaBefore: koaThisRound[koaThisRound.length - 1].rps });
          const perReq = run.statements !== undefined && run.total ? (run.statements / run.total).toFixed(2) : '—';
          const bad = run.non2xx + run.errors ? `, ${run.non2xx} non-2xx, ${run.errors} errors/timeouts` : '';
          log(
            `round ${round}/${ROUNDS} ${c.label}: ${fmt(run.rps * (c.pointsPerRequest ?? 1))} ${c.pointsPerRequest ? 'points' : 'req'}/s, p99 ${run.p99} ms, ${kbText(run.bytesPerAnswer / 1024)} KB/answer, ${perReq} SQL/req, ${cpu(run)}${bad}`,
          );
        } catch (err) {
          c.probeFailure = `load failed in round ${round}: ${(err as Error).message}`;
          log(`round ${round}/${ROUNDS} ${c.label}: ${c.probeFailure}`);
        } finally {
          if (mark) await removeCreatedSince(db, mark);
        }
      }
      await runKoa();
      koaRuns.push(koaThisRound);
      if (loadable.some((c) => c.cleanup))
        await db.raw('VACUUM ANALYZE gps_points, trips, devices, sessions, audit_events');
    }

    // Report.
    interface Row {
      c: Case;
      ratio: number;
      rate: number;
      p99: number;
      /** Median KB received per answer: a large answer is bound by bytes, not by the route's work. */
      kb?: number;
      sql?: number;
      cpu?: number;
      /** Median PostgreSQL + Redis CPU per request (µs). */
      stores?: number;
      /** Median share of the run the event loop was busy. */
      loop?: number;
      failures: string[];
    }
    const rows: Row[] = cases.map((c) => {
      const failures: string[] = [];
      if (c.probeFailure) failures.push(c.probeFailure);
      if (!c.runs.length) return { c, ratio: 0, rate: 0, p99: 0, failures };
      const ratio = median(c.runs.map((r) => r.ratio));
      const rps = median(c.runs.map((r) => r.rps));
      const p99 = median(c.runs.map((r) => r.p99));
      const total = c.runs.reduce((n, r) => n + r.total, 0);
      const stmts = c.runs.every((r) => r.statements !== undefined)
        ? c.runs.reduce((n, r) => n + r.statements!, 0)
        : undefined;
      const non2xx = c.runs.reduce((n, r) => n + r.non2xx, 0);
      const errors = c.runs.reduce((n, r) => n + r.errors, 0);
      if (non2xx) {
        const codes: Record<string, number> = {};
        for (const r of c.runs)
          for (const [k, v] of Object.entries(r.statusCodes)) if (!k.startsWith('2')) codes[k] = (codes[k] ?? 0) + v;
        failures.push(
          `${non2xx} non-2xx (${Object.entries(codes)
            .map(([k, v]) => `${k}×${v}`)
            .join(', ')})`,
        );
      }
      if (errors) failures.push(`${errors} errors/timeouts`);
      const miss = c.target?.check(ratio, p99, rps * (c.pointsPerRequest ?? 1));
      if (miss) failures.push(miss);
      return {
        c,
        ratio,
        rate: rps * (c.pointsPerRequest ?? 1),
        p99,
        kb: median(c.runs.map((r) => r.bytesPerAnswer)) / 1024,
        sql: stmts !== undefined && total ? stmts / total : undefined,
        cpu: medianCpu(c.runs),
        stores: medianOf(c.runs, (r) => r.storeCpuPerRequest),
        loop: medianOf(c.runs, (r) => r.loopBusy),
        failures,
      };
    });
    rows.sort((a, b) => a.ratio - b.ratio || a.c.label.localeCompare(b.c.label));

    const koaAll = koaRuns.flat();
    const out: string[] = [];
    out.push(
      '',
      '| route | kind | req/s | p99 ms | KB/answer | SQL/req | µs CPU/req | stores µs/req | loop | × Koa | target | result |',
      '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|',
    );
    for (const r of rows) {
      const loaded = r.c.runs.length > 0;
      const rate = loaded ? (r.c.pointsPerRequest ? `${fmt(r.rate)} points/s` : fmt(r.rate)) : '—';
      const result = r.failures.length ? `**FAIL**: ${r.failures.join('; ')}` : 'pass';
      // A run cut short (a pool of single-use values used up) says so; its rate is over its real length.
      const shortest = Math.min(...r.c.runs.map((x) => x.seconds));
      if (loaded && shortest < DURATION * 0.9) r.c.detail += `; a run ended after ${shortest} s (pool used up)`;
      out.push(
        `| ${r.c.label} | ${r.c.detail}; ${r.c.credential} | ${rate} | ${loaded ? r.p99 : '—'} | ${r.kb !== undefined ? kbText(r.kb) : '—'} | ${r.sql !== undefined ? r.sql.toFixed(2) : '—'} | ${r.cpu !== undefined ? r.cpu.toFixed(0) : '—'} | ${r.stores !== undefined ? r.stores.toFixed(0) : '—'} | ${loopPct(r.loop)} | ${loaded ? r.ratio.toFixed(r.ratio < 0.1 ? 3 : 2) : '—'} | ${r.c.target?.text ?? '—'} | ${result.replace(/\|/g, '\\|')} |`,
      );
    }
    out.push(
      '',
      `Koa baseline (bare Koa, small JSON, same node flags, ${koaAll.length} runs): median ${fmt(median(koaAll.map((r) => r.rps)))} req/s, p99 ${median(koaAll.map((r) => r.p99))} ms, ${medianCpu(koaAll)?.toFixed(1) ?? '—'} µs CPU/req, loop ${loopPct(medianOf(koaAll, (r) => r.loopBusy))}`,
    );
    if (unfilled.length) {
      out.push('', 'Skipped: cannot fill (not loaded, not failing the run):');
      for (const u of unfilled) out.push(`- ${u.entry.method} ${u.entry.path}: ${u.reason}`);
    }
    out.push(
      '',
      `Fixtures (rows): ${Object.entries(seeded)
        .map(([t, n]) => `${t} ${fmt(n)}`)
        .join(', ')}.`,
      `Settings: ${ROUNDS} rounds × ${DURATION} s per case after ${WARMUP} s warm-up, ${CONNECTIONS} connections, one api process and one Koa process (node ${NODE_ARGS.join(' ')}), loopback, Accept-Encoding: ${ACCEPT_ENCODING || '(none)'}; ` +
        `Koa every ${KOA_EVERY} cases, ratio = median over rounds of req/s ÷ mean of the Koa runs around it; req/s counts 2xx only; ` +
        `KB/answer = bytes received per answer (headers included, compressed as sent), median over rounds: at hundreds of KB the loopback copy, not the route, sets the rate; ` +
        `SQL/req = statements the api sent during the measured runs, less ${(baselinePerMs * 1000).toFixed(1)}/s idle, ÷ requests answered; ` +
        `µs CPU/req = the process's CPU time (user + system) over the measured run ÷ requests answered, median over rounds (PostgreSQL's and Redis's not included); ` +
        `stores µs/req = the CPU time of the machine's PostgreSQL and Redis server processes over the measured run ÷ requests answered, median over rounds (read from /proc; the whole machine's, so a store busy with something else counts too); ` +
        `loop = the share of the measured run the api's event loop was busy, median over rounds: well below 100% under load means the route waits (on the database, Redis or a batch), not on the api's CPU.${ONLY ? ` ONLY=${ONLY.source}.` : ''}`,
    );
    const after = await tableCounts(db);
    const drift = Object.keys(after).filter((t) => after[t] !== seeded[t]);
    out.push(
      drift.length
        ? `WARNING: table sizes changed during the run (later reads saw other sizes): ${drift.map((t) => `${t} ${seeded[t]} → ${after[t]}`).join(', ')}`
        : 'Table sizes after the run: as seeded.',
    );
    const failed = rows.filter((r) => r.failures.length);
    out.push(
      '',
      failed.length
        ? `${failed.length} of ${rows.length} routes FAIL their target or answered non-2xx.`
        : `All ${rows.length} routes meet their targets.`,
    );
    process.stdout.write(out.join('\n') + '\n');
    if (failed.length) exitCode = 1;
  } finally {
    await db.destroy();
    await cleanup();
  }
  process.exit(exitCode);
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
