/**
 * GPS ingest benchmark (npm run bench:gps), on loopback against a real stack:
 *
 *   1. single   POST /v1/gps, one point per request (rate limits raised through configuration)
 *   2. batch    POST /v1/gps/batch, 100 points per request
 *   3. insert   raw multi-row INSERT of the same 100 rows with pg (no HTTP, no cache, no publish)
 *   4. copy     COPY ... FROM STDIN with pg-copy-streams, 100 rows and 10,000 rows per statement
 *
 * The api runs as API_INSTANCES (default 2) node:cluster workers sharing one port, exactly as PM2's
 * cluster mode does, against a throw-away database (migrated and seeded here) and Redis prefix;
 * autocannon drives it on 127.0.0.1. Workers are not started: their geofence jobs wait in Redis and
 * are dropped with the prefix at the end, and so is the database `<name>_bench_gps` (unless
 * KEEP_DB=1; a run that was killed leaves it to the next run, which drops it first). Goals: batch
 * ≥ 25% of the best COPY rows/s, single ≥ 1,500 points/s.
 *
 * Environment: DATABASE_URL / REDIS_URL (as for the service), BENCH_SECONDS (10 per HTTP run),
 * BENCH_SINGLE_CONNECTIONS (64), BENCH_BATCH_CONNECTIONS (16), API_INSTANCES (2), BENCH_API_NODE_ARGS
 * (node flags for the api instances, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof").
 */
import 'reflect-metadata';
import cluster, { Worker } from 'node:cluster';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import autocannon from 'autocannon';
import knex, { Knex } from 'knex';
import { from as copyFrom } from 'pg-copy-streams';
import { createApiKey } from '../shared/commands/apiKeys';
import { loadConfig } from '../shared/config';
import { createDb, migrate } from '../shared/db';
import { seed } from '../shared/seed';
import { benchCleanup } from './benchDatabase';

const SECONDS = Number(process.env.BENCH_SECONDS || 10);
const SINGLE_CONNECTIONS = Number(process.env.BENCH_SINGLE_CONNECTIONS || 64);
const BATCH_CONNECTIONS = Number(process.env.BENCH_BATCH_CONNECTIONS || 16);
const INSTANCES = Number(
  process.env.API_INSTANCES && process.env.API_INSTANCES !== 'max' ? process.env.API_INSTANCES : 2,
);
const BATCH = 100;
const RAW_CLIENTS = 4;

interface Row {
  name: string;
  rowsPerStatement: number;
  rowsPerSecond: number;
  p99Ms: number;
  note: string;
}

function point(i: number) {
  return {
    latitude: 52.5 + (i % 1000) / 100_000,
    longitude: 13.4 + (i % 1000) / 100_000,
    altitude: 34,
    heading: 90,
    timestamp: Math.floor(Date.now() / 1000) - 3600 + (i % 3600),
    speed_kmh: 36,
    speed_mps: 10,
    speed_mph: 22.37,
    speed_knots: 19.44,
    hdop: 0.9,
    device_id: `bench-${i % 20}`,
  };
}

const COLUMNS = [
  'device_id',
  'latitude',
  'longitude',
  'altitude',
  'heading',
  'timestamp',
  'speed_kmh',
  'speed_mps',
  'speed_mph',
  'speed_knots',
  'hdop',
] as const;
function dbRow(i: number) {
  const p = point(i);
  return { ...p, timestamp: new Date(p.timestamp * 1000) };
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Runs `statement` on RAW_CLIENTS connections for SECONDS; rows/s and per-statement p99. */
async function rawLoop(
  db: Knex,
  name: string,
  rowsPerStatement: number,
  statement: (conn: any, offset: number) => Promise<void>,
  note: string,
): Promise<Row> {
  const latencies: number[] = [];
  let rows = 0;
  const started = Date.now();
  const end = started + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: RAW_CLIENTS }, async (_, c) => {
      const conn = await db.client.acquireConnection();
      try {
        let n = c * 1_000_000;
        while (Date.now() < end) {
          const t0 = process.hrtime.bigint();
          await statement(conn, n);
          latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
          rows += rowsPerStatement;
          n += rowsPerStatement;
        }
      } finally {
        await db.client.releaseConnection(conn);
      }
    }),
  );
  const elapsed = (Date.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { name, rowsPerStatement, rowsPerSecond: rows / elapsed, p99Ms: percentile(latencies, 99), note };
}

function multiRowInsert(offset: number, count: number): { text: string; values: unknown[] } {
  const values: unknown[] = [];
  const tuples: string[] = [];
  for (let i = 0; i < count; i++) {
    const r = dbRow(offset + i);
    const base = values.length;
    values.push(...COLUMNS.map((c) => r[c]));
    tuples.push(`(${COLUMNS.map((_, j) => `$${base + j + 1}`).join(', ')})`);
  }
  return {
    text: `INSERT INTO gps_points (${COLUMNS.map((c) => `"${c}"`).join(', ')}) VALUES ${tuples.join(', ')}`,
    values,
  };
}

function copyText(offset: number, count: number): string {
  let out = '';
  for (let i = 0; i < count; i++) {
    const r = dbRow(offset + i);
    out += COLUMNS.map((c) => (c === 'timestamp' ? (r[c] as Date).toISOString() : String(r[c]))).join('\t') + '\n';
  }
  return out;
}

async function copyRows(conn: any, offset: number, count: number): Promise<void> {
  const stream = conn.query(copyFrom(`COPY gps_points (${COLUMNS.map((c) => `"${c}"`).join(', ')}) FROM STDIN`));
  await pipeline(Readable.from([copyText(offset, count)]), stream);
}

async function http(
  name: string,
  url: string,
  token: string,
  body: string,
  connections: number,
  pointsPerRequest: number,
  note: string,
): Promise<Row> {
  const opts = {
    url,
    method: 'POST' as const,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body,
    connections,
    pipelining: 1,
  };
  await autocannon({ ...opts, duration: 2 }); // warm-up: JIT, pools, caches
  const r = await autocannon({ ...opts, duration: SECONDS });
  const ok = r['2xx'];
  if (r.non2xx || r.errors || r.timeouts) {
    throw new Error(
      `${name}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts (of ${r.requests.total})`,
    );
  }
  return {
    name,
    rowsPerStatement: pointsPerRequest,
    rowsPerSecond: (ok * pointsPerRequest) / r.duration,
    p99Ms: r.latency.p99,
    note: `${note}; ${connections} connections, ${Math.round(r.requests.average)} req/s`,
  };
}

async function main(): Promise<void> {
  const base = new URL(process.env.DATABASE_URL || 'postgres://postgres:postgres@127.0.0.1:5432/service');
  const dbName = `${decodeURIComponent(base.pathname.slice(1)) || 'service'}_bench_gps`;
  const admin = new URL(base.toString());
  admin.pathname = '/postgres';
  const dbUrl = new URL(base.toString());
  dbUrl.pathname = `/${dbName}`;
  const redisPrefix = `bench:${randomBytes(4).toString('hex')}:`;
  const port = await freePort();
  const env: Record<string, string> = {
    NODE_ENV: 'production',
    SECRETS_KEY: randomBytes(32).toString('base64'),
    DATABASE_URL: dbUrl.toString(),
    DATABASE_POOL_MAX: '10',
    REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379',
    REDIS_PREFIX: redisPrefix,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    RATE_LIMIT_GPS_POST: '1000000000',
    RATE_LIMIT_API_KEY: '1000000000',
  };

  const adminDb = knex({ client: 'pg', connection: admin.toString(), pool: { min: 0, max: 1 } });
  await adminDb.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [dbName]);
  await adminDb.raw('CREATE DATABASE ??', [dbName]);
  await adminDb.destroy();
  const config = loadConfig(env);
  const db = createDb(config, { poolMax: RAW_CLIENTS + 1 });
  const workers: Worker[] = [];
  const cleanup = benchCleanup({ url: dbUrl.toString(), redisUrl: env.REDIS_URL, redisPrefix }, async () => {
    // The api instances stop (and their queue jobs land) before the database and the prefix go.
    for (const w of workers) if (!w.isDead()) w.kill('SIGKILL');
    await Promise.all(workers.map((w) => new Promise((r) => (w.isDead() ? r(null) : w.once('exit', r)))));
    await db.destroy();
  });
  const results: Row[] = [];
  try {
    await migrate(db);
    await seed(db);
    const [user] = await db('users').insert({ username: 'bench_tracker' }).returning('id');
    await db('user_roles').insert({ user_id: user.id, role_id: 'role_developer' });
    const { key } = await createApiKey(
      { userId: user.id, name: 'bench tracker', scopes: ['gps:write', 'gps:read'] },
      db,
    );

    process.stdout.write(`starting ${INSTANCES} api instances (node:cluster) on 127.0.0.1:${port}\n`);
    const execArgv = (process.env.BENCH_API_NODE_ARGS ?? '').split(' ').filter(Boolean);
    cluster.setupPrimary({ exec: path.resolve(__dirname, '..', 'api', 'server.js'), execArgv });
    for (let i = 0; i < INSTANCES; i++) workers.push(cluster.fork({ ...process.env, ...env }));
    await Promise.all(
      workers.map(
        (w) =>
          new Promise<void>((resolve, reject) => {
            w.once('listening', () => resolve());
            w.once('exit', (code) => reject(new Error(`api instance exited with ${code}`)));
          }),
      ),
    );

    const url = `http://127.0.0.1:${port}`;
    // Every run starts from an empty table, so index growth favours none of them.
    const fresh = () => db.raw('TRUNCATE gps_points');
    process.stdout.write(`single POST /v1/gps for ${SECONDS} s…\n`);
    results.push(
      await http(
        'single POST /v1/gps',
        `${url}/v1/gps`,
        key,
        JSON.stringify(point(1)),
        SINGLE_CONNECTIONS,
        1,
        'HTTP, auth, rate limit, cache, publish, enqueue',
      ),
    );
    process.stdout.write(`batch POST /v1/gps/batch (${BATCH}) for ${SECONDS} s…\n`);
    await fresh();
    const batchBody = JSON.stringify({ points: Array.from({ length: BATCH }, (_, i) => point(i)) });
    results.push(
      await http(
        `batch POST /v1/gps/batch`,
        `${url}/v1/gps/batch`,
        key,
        batchBody,
        BATCH_CONNECTIONS,
        BATCH,
        'same work per request',
      ),
    );
    for (const w of workers) w.kill('SIGTERM');
    await Promise.all(workers.map((w) => new Promise((r) => (w.isDead() ? r(null) : w.once('exit', r)))));

    process.stdout.write(`raw INSERT and COPY for ${SECONDS} s each…\n`);
    await fresh();
    results.push(
      await rawLoop(
        db,
        'raw multi-row INSERT (pg)',
        BATCH,
        async (conn, n) => {
          const q = multiRowInsert(n, BATCH);
          await conn.query(q.text, q.values);
        },
        `${RAW_CLIENTS} connections`,
      ),
    );
    await fresh();
    results.push(
      await rawLoop(
        db,
        'COPY FROM STDIN (pg-copy-streams)',
        BATCH,
        (conn, n) => copyRows(conn, n, BATCH),
        `${RAW_CLIENTS} connections`,
      ),
    );
    await fresh();
    results.push(
      await rawLoop(
        db,
        'COPY FROM STDIN (pg-copy-streams)',
        10_000,
        (conn, n) => copyRows(conn, n, 10_000),
        `${RAW_CLIENTS} connections`,
      ),
    );
  } finally {
    await cleanup();
  }

  const bestCopy = Math.max(...results.filter((r) => r.name.startsWith('COPY')).map((r) => r.rowsPerSecond));
  const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
  const lines = [
    '| method | rows per statement | rows/s | p99 (ms) | % of best COPY | notes |',
    '|---|---:|---:|---:|---:|---|',
    ...results.map(
      (r) =>
        `| ${r.name} | ${r.rowsPerStatement} | ${fmt(r.rowsPerSecond)} | ${r.p99Ms.toFixed(1)} | ${((100 * r.rowsPerSecond) / bestCopy).toFixed(1)}% | ${r.note} |`,
    ),
  ];
  const single = results[0].rowsPerSecond;
  const batch = results[1].rowsPerSecond;
  lines.push(
    '',
    `goal single ≥ 1,500 points/s with ${INSTANCES} api instances: ${fmt(single)} → ${single >= 1500 ? 'met' : 'NOT met'}`,
  );
  lines.push(
    `goal batch ≥ 25% of COPY rows/s: ${((100 * batch) / bestCopy).toFixed(1)}% → ${batch >= 0.25 * bestCopy ? 'met' : 'NOT met'}`,
  );
  process.stdout.write(lines.join('\n') + '\n');
}

if (cluster.isPrimary) {
  main().then(
    () => process.exit(0),
    (err) => {
      process.stderr.write(`bench failed: ${err?.stack ?? err}\n`);
      process.exit(1);
    },
  );
}
