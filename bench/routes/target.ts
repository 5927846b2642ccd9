import 'reflect-metadata';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import pg from 'pg';

/**
 * A target process of bench:routes (argv[2] = 'koa' | 'api'); prints `READY <port> [<countPort>]`.
 *
 * 'api' is the real api (api/server.ts startApi) with one addition: every statement this process
 * sends to PostgreSQL is counted, at the driver (pg.Client#query), so statements that bypass knex's
 * query builder (the prepared row loader, GPS ingest's named INSERT, BEGIN/COMMIT) count too. The
 * count is read over a second HTTP port on loopback (GET / → {"statements": n, "cpuMicros": t}),
 * outside the measured server, so reading it costs the measured process nothing but one tiny
 * request. `cpuMicros` is the process's CPU time so far (user + system): both targets serve it, so
 * the run can report CPU per request, which a busy or noisy machine does not move as it moves
 * req/s. `loopActiveMs` and `loopIdleMs` say how much of its time the event loop was busy: a route
 * whose loop stays well below 100% under load waits on something (the database, Redis, a batch)
 * rather than on the api's CPU.
 */
let statements = 0;
/** SQL_TEXTS=1: statements counted by text too, printed to stderr at exit (most frequent first). */
const texts = process.env.SQL_TEXTS ? new Map<string, number>() : undefined;
const clientProto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
const originalQuery = clientProto.query;
clientProto.query = function countedQuery(this: unknown, ...args: unknown[]) {
  statements++;
  if (texts) {
    const q = args[0] as string | { text?: string };
    const text = (typeof q === 'string' ? q : (q?.text ?? '')).replace(/\s+/g, ' ').slice(0, 160);
    texts.set(text, (texts.get(text) ?? 0) + 1);
  }
  return originalQuery.apply(this, args);
};
if (texts)
  process.once('exit', () => {
    for (const [text, n] of [...texts].sort((a, b) => b[1] - a[1]).slice(0, 25))
      process.stderr.write(`${String(n).padStart(9)}  ${text}\n`);
  });

const BODY = { status: 'ok', version: '1.0.0', timestamp: '2026-01-01T00:00:00.000Z' };

function listen(server: http.Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

/**
 * The loopback server that reports the statement count, the CPU time used so far, and the event
 * loop's busy and idle time so far (ms; `performance.eventLoopUtilization()`).
 */
function counterServer(): http.Server {
  return http.createServer((_req, res) => {
    const cpu = process.cpuUsage();
    const { active, idle } = performance.eventLoopUtilization();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ statements, cpuMicros: cpu.user + cpu.system, loopActiveMs: active, loopIdleMs: idle }));
  });
}

/**
 * SURVIVORS=<file>: a sampling heap profile (.heapprofile, for Chrome DevTools or a script) of the
 * objects allocated from here on that outlived a scavenge: the ones still alive at exit and the
 * ones a full GC collected later, but not those the young generation collected. A request's objects
 * should all die young (README "Garbage dies young"), so what an answered route leaves here, by
 * allocation site, is what it promotes. Written when the target is stopped.
 */
async function sampleSurvivors(file: string): Promise<() => Promise<void>> {
  const { Session } = await import('node:inspector');
  const { writeFile } = await import('node:fs/promises');
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) =>
      session.post(method, params ?? {}, (err, result) => (err ? reject(err) : resolve(result))),
    );
  await post('HeapProfiler.enable');
  await post('HeapProfiler.startSampling', {
    samplingInterval: 16384,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: false,
  });
  return async () => {
    const { profile } = (await post('HeapProfiler.stopSampling')) as { profile: unknown };
    await writeFile(file, JSON.stringify(profile));
    session.disconnect();
  };
}

async function main(kind: string): Promise<void> {
  if (kind === 'koa') {
    const app = new Koa();
    app.use((ctx) => {
      ctx.body = BODY;
    });
    const port = await listen(http.createServer(app.callback()));
    process.stdout.write(`READY ${port} ${await listen(counterServer())}\n`);
    return;
  }
  if (kind !== 'api') throw new Error(`unknown target ${kind}`);
  // Loaded after the patch above (the api's modules require pg through knex either way).
  const { startApi } = await import('../../api/server');
  const { loadConfig } = await import('../../shared/config');
  const config = loadConfig({ ...process.env, PORT: '0', HOST: '127.0.0.1' });
  const api = await startApi(config, { port: 0 });
  const survivors = process.env.SURVIVORS ? await sampleSurvivors(process.env.SURVIVORS) : undefined;
  const counter = counterServer();
  const countPort = await listen(counter);
  process.stdout.write(`READY ${api.port} ${countPort}\n`);
  const stop = async () => {
    counter.close();
    await survivors?.().catch((err: Error) => process.stderr.write(`SURVIVORS: ${err.message}\n`));
    api.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main(process.argv[2]).catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
