import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import v8 from 'node:v8';
import { trackConnections } from '../../api/drain';
import { createRedis, FAIL_FAST } from '../../shared/redis';
import { z } from '../../shared/zod';

/**
 * A child process of test/api/drainGarbage.test.ts: `node gcProbe.js tracked|plain|effects|redis|retain [requests]`.
 * Serves keep-alive requests the way the api does (keepAliveTimeout 65 s, each answer after one
 * turn of waiting, as a batched read makes it), with or without the api's connection tracker
 * (api/drain.ts), loads itself over 50 keep-alive sockets, and prints how many bytes the young
 * generation's collections moved into the old one per request: what lived through a scavenge.
 * `effects` also validates each request's path with a refinement and a transform (zod's
 * ZodEffects, as route params and queries do) before waiting. `redis` answers each request after four
 * commands and a pipeline on a fail-fast Redis connection, as the rate limiter, the caches and the
 * outbox relay send them (REDIS_URL, a key of its own). `retain` is the control: it keeps every answered response for the next half of the run's
 * requests, which the measurement must see.
 */
const mode = process.argv[2];
const requests = Number(process.argv[3] ?? 20000);
const CONNECTIONS = 50;
const silent = { info() {}, warn() {}, debug() {}, error() {} };

async function main(): Promise<void> {
  const effects = z.object({
    id: z.string().refine((v) => v.length > 0, 'must not be empty'),
    n: z
      .string()
      .transform((v) => v.length)
      .optional(),
  });
  // The control keeps each answered response for the next RETAINED requests (a ring), however fast
  // the machine runs: kept for half a second instead, on a loaded machine too few requests fell in
  // that time for the responses to outlive two scavenges, and the control saw nothing.
  const RETAINED = Math.floor(requests / 2);
  const kept: http.ServerResponse[] = [];
  let served = 0;
  const redis =
    mode === 'redis'
      ? // A fail-fast connection (breakOnStall) whose commands may wait longer on a busy test machine.
        createRedis({ redisUrl: process.env.REDIS_URL || 'redis://127.0.0.1:6379' } as never, {
          ...FAIL_FAST,
          commandTimeout: 10_000,
        })
      : undefined;
  const key = `gc-probe:${process.pid}`;
  const answer = (res: http.ServerResponse) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ ok: true, at: Date.now() }));
  };
  const server = http.createServer((req, res) => {
    if (mode === 'retain') kept[served++ % RETAINED] = res;
    if (mode === 'effects' && !effects.safeParse({ id: req.url, n: req.method }).success) throw new Error('bad');
    if (redis) {
      const member = `${req.url}:${served++}`;
      void Promise.all([
        ...Array.from({ length: 4 }, () => redis.incr(key)),
        redis.pipeline().zadd(`${key}:z`, 0, member).zrem(`${key}:z`, member).exec(),
      ])
        .then(() => answer(res))
        .catch((err: Error) => {
          process.stderr.write(`${err.message}\n`);
          process.exit(1);
        });
      return;
    }
    setImmediate(() => answer(res));
  });
  server.keepAliveTimeout = 65_000;
  if (mode === 'tracked') trackConnections(server, silent as never);
  // A fail-fast connection refuses commands until it is ready: wait for it before the load.
  if (redis && redis.status !== 'ready') await new Promise((r) => redis.once('ready', r));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const get = () =>
    new Promise<void>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
          res.resume();
          res.on('end', resolve);
        })
        .on('error', reject);
    });
  // Warm-up: sockets, JIT, and the young generation grown to its size under this load.
  let sent = 0;
  const run = async (n: number) => {
    const worker = async () => {
      while (sent < n) {
        sent++;
        await get();
      }
    };
    await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  };
  await run(5000);

  let promoted = 0;
  let lastOld = oldSpaceUsed();
  let measuring = true;
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = (e as unknown as { detail?: { kind?: number } }).detail?.kind;
      const old = oldSpaceUsed();
      // Growth of the old space across a scavenge is what it promoted (full collections shrink it).
      if (measuring && kind === constants.NODE_PERFORMANCE_GC_MINOR && old > lastOld) promoted += old - lastOld;
      lastOld = old;
    }
  });
  obs.observe({ entryTypes: ['gc'] });
  sent = 0;
  lastOld = oldSpaceUsed();
  await run(requests);
  measuring = false;
  obs.disconnect();
  agent.destroy();
  server.close();
  if (redis) await redis.del(key, `${key}:z`);
  process.stdout.write(`${JSON.stringify({ mode, requests, promotedPerRequest: promoted / requests })}\n`);
  process.exit(0);
}

function oldSpaceUsed(): number {
  return v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space')!.space_used_size;
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
