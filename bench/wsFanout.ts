/**
 * WebSocket fan-out benchmark (issue 6), npm run bench:ws. One run on this machine, loopback:
 *
 *   For N subscribers of `gps` (default 1,000 and 10,000), against
 *     - the realtime process (dist/realtime/server.js, started as a child process, clients
 *       authenticated with a Bearer session token and subscribed with the JSON protocol), and
 *     - a bare `ws` server (bench/wsBare.ts) broadcasting the same Redis messages to everyone,
 *   measures
 *     1. memory per idle connection: RSS (and heap) of the server after a GC with N idle
 *        subscribers, minus the same before they connected, divided by N;
 *     2. broadcast latency publish → receive (p50/p99/max) at a steady rate of
 *        BENCH_WS_RATE deliveries/s (default 50,000: 50 msg/s to 1,000 clients, 5 msg/s to 10,000)
 *        for BENCH_WS_SECONDS (10);
 *     3. delivered messages/s for a burst of BENCH_WS_BURST deliveries (default 500,000:
 *        500 messages to 1,000 clients, 50 to 10,000), published as fast as Redis takes them.
 *   Messages are realistic gpsUpdate pushes (~420 bytes), published to Redis exactly as EventBus
 *   does. All N clients live in this one load process.
 *
 * Goals at 10,000 subscribers: p99 < 250 ms, ≥ 70% of the bare server's delivered msg/s,
 * < 20 KiB per idle connection.
 * Environment: DATABASE_URL, REDIS_URL, BENCH_WS_CLIENTS ("1000,10000"), BENCH_WS_RATE,
 * BENCH_WS_SECONDS, BENCH_WS_BURST, KEEP_DB=1 (keep the database `<name>_bench_ws`, dropped at the
 * end otherwise; the run's Redis keys are always deleted).
 */
import 'reflect-metadata';
import { ChildProcess, fork } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import Redis from 'ioredis';
import { benchCleanup, freshBenchDatabase } from './benchDatabase';
import WebSocket from 'ws';
import { createSession } from '../shared/commands/sessions';

const SIZES = (process.env.BENCH_WS_CLIENTS || '1000,10000').split(',').map(Number);
const RATE = Number(process.env.BENCH_WS_RATE || 50_000);
const SECONDS = Number(process.env.BENCH_WS_SECONDS || 10);
const BURST = Number(process.env.BENCH_WS_BURST || 500_000);
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const PREFIX = `benchws:${Date.now()}:`;
const CHANNEL = `${PREFIX}ws:gps`;
const CONNECT_BATCH = 200;

type Kind = 'realtime' | 'bare ws';

async function prepare(): Promise<{ env: Record<string, string>; token: string }> {
  const settings = {
    REDIS_URL,
    REDIS_PREFIX: PREFIX,
    LOG_LEVEL: 'warn',
    NODE_ENV: 'production',
    SECRETS_KEY: Buffer.alloc(32, 7).toString('base64'),
  };
  const { url, db } = await freshBenchDatabase('bench_ws', settings);
  const env = { DATABASE_URL: url, ...settings };
  const [user] = await db('users').insert({ username: 'bench_ws' }).returning('id');
  // Subscribing to `gps` needs gps:read, which the User role does not hold: a read-only API role does.
  await db('user_roles').insert({ user_id: user.id, role_id: 'role_api_read_only' });
  const { token } = await createSession(db, user.id, new Date(Date.now() + 86400_000), {});
  await db.destroy();
  return { env, token };
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

interface Probe {
  rss: number;
  heapUsed: number;
  connections: number;
}

class Server {
  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
  ) {}

  static async start(kind: Kind, env: Record<string, string>): Promise<Server> {
    const child =
      kind === 'realtime'
        ? fork(path.resolve(__dirname, '../realtime/server.js'), ['--ipc-probe'], {
            execArgv: ['--expose-gc'],
            env: { ...process.env, ...env, REALTIME_PORT: String(await freePort()) },
          })
        : fork(path.resolve(__dirname, 'wsBare.js'), [REDIS_URL, CHANNEL], {
            execArgv: ['--expose-gc'],
            env: process.env,
          });
    const port = await new Promise<number>((resolve, reject) => {
      child.on('message', (m: { cmd?: string; port?: number }) => m.cmd === 'ready' && resolve(m.port!));
      child.once('exit', (code) => reject(new Error(`${kind} exited with ${code}`)));
    });
    const server = new Server(child, port);
    Server.running.add(server);
    return server;
  }

  /** Servers started and not yet stopped: the cleanup stops them before the database goes. */
  static readonly running = new Set<Server>();

  probe(): Promise<Probe> {
    return new Promise((resolve) => {
      const on = (m: { cmd?: string; memory?: NodeJS.MemoryUsage; stats?: { connections: number } }) => {
        if (m.cmd !== 'memory') return;
        this.child.off('message', on);
        resolve({ rss: m.memory!.rss, heapUsed: m.memory!.heapUsed, connections: m.stats!.connections });
      };
      this.child.on('message', on);
      this.child.send({ cmd: 'memory' });
    });
  }

  async stop(): Promise<void> {
    Server.running.delete(this);
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

// ---- measurement state shared by every client's message handler -------------------------------

const ID_OFFSET = '{"type":"gpsUpdate","data":{"id":"'.length;
let sentAt = new Float64Array(1);
let samples = new Float64Array(1);
let sampleCount = 0;
let received = 0;
let lastReceipt = 0;

function onMessage(data: Buffer): void {
  if (data[2] !== 0x74 /* t of "type" */ || data[9] !== 0x67 /* g of gpsUpdate */) return;
  const end = data.indexOf(0x22, ID_OFFSET);
  const seq = Number(data.toString('latin1', ID_OFFSET, end));
  const now = performance.now();
  received++;
  lastReceipt = now;
  if (sampleCount < samples.length) samples[sampleCount++] = now - sentAt[seq];
}

function gpsMessage(seq: number): string {
  const t = new Date().toISOString();
  return JSON.stringify({
    type: 'gpsUpdate',
    data: {
      id: String(seq),
      device_id: '6f1c2f0e-4a0b-4f7e-9d38-1c2b3a4d5e6f',
      trip_id: '0b7d7c52-2f7e-4d5b-8a9f-3e2d1c0b9a8f',
      latitude: 53.5511 + (seq % 100) / 10000,
      longitude: 9.9937 + (seq % 100) / 10000,
      altitude: 12.5,
      heading: 87.3,
      timestamp: t,
      speed_kmh: 18.52,
      speed_mps: 5.144,
      speed_mph: 11.508,
      speed_knots: 10,
      pdop: 1.8,
      hdop: 0.9,
      vdop: 1.5,
      created_at: t,
    },
  });
}

async function connectAll(kind: Kind, port: number, n: number, token: string): Promise<WebSocket[]> {
  const clients: WebSocket[] = [];
  const one = () =>
    new Promise<WebSocket>((resolve, reject) => {
      const ws = new WebSocket(
        `ws://127.0.0.1:${port}/v1/ws`,
        kind === 'realtime' ? { headers: { authorization: `Bearer ${token}` } } : {},
      );
      ws.once('error', reject);
      ws.once('open', () => {
        if (kind === 'bare ws') return resolve(ws);
        ws.once('message', (d: Buffer) => {
          const m = JSON.parse(d.toString());
          if (m.data !== 'Subscribed to gps') return reject(new Error(`subscribe failed: ${d}`));
          resolve(ws);
        });
        ws.send('{"type":"subscribe","channel":"gps"}');
      });
    });
  for (let i = 0; i < n; i += CONNECT_BATCH) {
    const batch = await Promise.all(Array.from({ length: Math.min(CONNECT_BATCH, n - i) }, one));
    for (const ws of batch) {
      ws.on('message', onMessage);
      clients.push(ws);
    }
  }
  return clients;
}

async function waitFor(cond: () => boolean, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

const pct = (sorted: Float64Array, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

interface Row {
  kind: Kind;
  n: number;
  p50: number;
  p99: number;
  max: number;
  latencyLost: number;
  msgsPerSec: number;
  burstLost: number;
  rssPerConnKiB: number;
  heapPerConnKiB: number;
}

async function run(kind: Kind, n: number, env: Record<string, string>, token: string, pub: Redis): Promise<Row> {
  const server = await Server.start(kind, env);
  try {
    // Warm-up connection (JIT, credential cache), then the idle baseline.
    const warm = await connectAll(kind, server.port, 20, token);
    for (const ws of warm) ws.terminate();
    await new Promise((r) => setTimeout(r, 500));
    const before = await server.probe();
    const clients = await connectAll(kind, server.port, n, token);
    await new Promise((r) => setTimeout(r, 1000));
    const idle = await server.probe();
    if (idle.connections !== n) throw new Error(`${kind}: ${idle.connections} connections, expected ${n}`);

    // 1. Latency at a steady rate.
    const perSecond = Math.max(1, Math.round(RATE / n));
    const messages = perSecond * SECONDS;
    const burstMessages = Math.max(1, Math.round(BURST / n));
    sentAt = new Float64Array(messages + burstMessages + 1);
    samples = new Float64Array(messages * n);
    sampleCount = 0;
    received = 0;
    let seq = 0;
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        if (seq >= messages) {
          clearInterval(timer);
          resolve();
          return;
        }
        sentAt[seq] = performance.now();
        void pub.publish(CHANNEL, gpsMessage(seq++));
      }, 1000 / perSecond);
    });
    await waitFor(() => received >= messages * n, 30_000);
    const lat = samples.slice(0, sampleCount).sort();
    const latencyLost = messages * n - received;

    // 2. Burst throughput.
    samples = new Float64Array(0);
    received = 0;
    const t0 = performance.now();
    for (let i = 0; i < burstMessages; i++) {
      sentAt[seq] = performance.now();
      void pub.publish(CHANNEL, gpsMessage(seq++));
    }
    await waitFor(() => received >= burstMessages * n, 120_000);
    const msgsPerSec = received / ((lastReceipt - t0) / 1000);
    const burstLost = burstMessages * n - received;

    for (const ws of clients) ws.terminate();
    return {
      kind,
      n,
      p50: pct(lat, 50),
      p99: pct(lat, 99),
      max: lat[lat.length - 1],
      latencyLost,
      msgsPerSec,
      burstLost,
      rssPerConnKiB: (idle.rss - before.rss) / n / 1024,
      heapPerConnKiB: (idle.heapUsed - before.heapUsed) / n / 1024,
    };
  } finally {
    await server.stop();
  }
}

async function main(): Promise<void> {
  const { env, token } = await prepare();
  const pub = new Redis(REDIS_URL);
  const cleanup = benchCleanup({ url: env.DATABASE_URL, redisUrl: REDIS_URL, redisPrefix: PREFIX }, async () => {
    await Promise.all([...Server.running].map((s) => s.stop()));
    pub.disconnect();
  });
  const rows: Row[] = [];
  try {
    for (const n of SIZES) {
      for (const kind of ['realtime', 'bare ws'] as Kind[]) {
        process.stderr.write(`${kind}, ${n} clients …\n`);
        const r = await run(kind, n, env, token, pub);
        rows.push(r);
        process.stderr.write(
          `  p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, ${r.msgsPerSec.toFixed(0)} msg/s, ${r.rssPerConnKiB.toFixed(1)} KiB/conn\n`,
        );
        await new Promise((res) => setTimeout(res, 1000));
      }
    }
  } finally {
    await cleanup();
  }

  const out = (s: string) => process.stdout.write(s);
  out(
    '\n| server | subscribers | latency p50 ms | p99 ms | max ms | burst delivered msg/s | % of bare ws | RSS per idle conn KiB | heap per idle conn KiB | lost |\n',
  );
  out('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n');
  for (const r of rows) {
    const bare = rows.find((x) => x.kind === 'bare ws' && x.n === r.n)!;
    out(
      `| ${r.kind} | ${r.n.toLocaleString('en')} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.max.toFixed(1)} | ${Math.round(r.msgsPerSec).toLocaleString('en')} | ${((100 * r.msgsPerSec) / bare.msgsPerSec).toFixed(0)}% | ${r.rssPerConnKiB.toFixed(1)} | ${r.heapPerConnKiB.toFixed(1)} | ${r.latencyLost + r.burstLost} |\n`,
    );
  }
  const big = Math.max(...SIZES);
  const rt = rows.find((r) => r.kind === 'realtime' && r.n === big)!;
  const bare = rows.find((r) => r.kind === 'bare ws' && r.n === big)!;
  const ratio = rt.msgsPerSec / bare.msgsPerSec;
  out(`\ngoals at ${big.toLocaleString('en')} subscribers:\n`);
  out(`  p99 latency < 250 ms: ${rt.p99.toFixed(1)} ms ${rt.p99 < 250 ? 'met' : 'MISSED'}\n`);
  out(`  ≥ 70% of bare ws delivered msg/s: ${(ratio * 100).toFixed(0)}% ${ratio >= 0.7 ? 'met' : 'MISSED'}\n`);
  out(
    `  < 20 KiB per idle connection: ${rt.rssPerConnKiB.toFixed(1)} KiB ${rt.rssPerConnKiB < 20 ? 'met' : 'MISSED'}\n`,
  );
  out(
    `(steady phase: ${RATE.toLocaleString('en')} deliveries/s for ${SECONDS} s; burst: ${BURST.toLocaleString('en')} deliveries; ~${Buffer.byteLength(gpsMessage(1))} byte gpsUpdate; all clients in one load process; servers are child processes)\n`,
  );
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err?.stack ?? err}\n`);
    process.exit(1);
  },
);
