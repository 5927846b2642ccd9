import test from 'ava';
import { spawnService, type ServiceProcess } from '../helpers/processes';
import { PrivateRedis, startPrivateRedis } from '../helpers/redisServer';
import { Stack, startStack } from '../helpers/stack';
import { sleep } from '../helpers/wait';

/**
 * A Redis outage is logged, not shouted: ioredis retries every connection (a workers process has
 * one per queue, and its BullMQ workers pass their errors on), and each failed attempt is an
 * 'error'. The operator sees each distinct error once per ten seconds, with how many it stands
 * for, and one line when Redis is back.
 */
let redis: PrivateRedis;
let s: Stack;
const services: ServiceProcess[] = [];

test.before(async () => {
  redis = await startPrivateRedis();
  s = await startStack({ env: { REDIS_URL: redis.url } });
});
test.after.always(async () => {
  await Promise.all(services.map((p) => p.kill()));
  await redis?.start().catch(() => undefined);
  await s?.close();
  await redis?.stop();
});

test('an outage of several seconds logs each error once per process, and its end once', async (t) => {
  services.push(await spawnService('workers', s.env, 'workers ready'));
  services.push(await spawnService('api', { ...s.env, PORT: '0' }, 'api listening'));
  const seen = services.map((p) => p.logs.length);
  await redis.stop();
  // Long enough for every connection to fail several reconnect attempts (ioredis waits 50 ms more
  // each time, up to 2 s), well within one repeat interval.
  await sleep(6000);
  for (const [i, p] of services.entries()) {
    const name = i === 0 ? 'workers' : 'api';
    const lines = p.logs.slice(seen[i]).filter((l) => (l.level as number) >= 40);
    t.true(lines.length >= 1, `${name}: the outage is logged`);
    t.true(
      lines.every((l) => l.msg === 'redis error' && typeof l.err === 'string' && typeof l.connection === 'string'),
      `${name}: ${JSON.stringify(lines.slice(0, 3))}`,
    );
    // Each distinct message once: a handful of lines, not one per connection and attempt.
    const distinct = new Set(lines.map((l) => l.err as string));
    t.is(lines.length, distinct.size, `${name}: ${lines.length} lines for ${distinct.size} distinct errors`);
    t.true(lines.length <= 4, `${name}: ${lines.length} lines in 6 s`);
  }
  await redis.start();
  for (const p of services) {
    const back = await p.waitForLog('redis reachable again', 15_000);
    // The repeats the folded lines stood for are counted, not lost.
    t.true((back.repeated as number) > 0, JSON.stringify(back));
  }
});
