import test from 'ava';
import { createUser, TestUser } from '../helpers/factories';
import { PrivateRedis, startPrivateRedis } from '../helpers/redisServer';
import { Stack, startStack } from '../helpers/stack';
import { gpsBody, make, nowSeconds } from './fixtures';

// One private redis-server that the tests stop and restart, and one stack pointed at it: serial.
let redis: PrivateRedis;
let s: Stack;
let dev: TestUser;

test.before(async () => {
  redis = await startPrivateRedis();
  s = await startStack({
    env: { REDIS_URL: redis.url, RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' },
    workers: true,
    realtime: 1,
  });
  dev = await createUser(s.db, { roles: ['role_developer'] });
});

test.after.always(async () => {
  await redis?.start().catch(() => undefined);
  await s?.close();
  await redis?.stop();
});

/** Runs `fn` and returns its result with the time it took. */
async function timed<T>(fn: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const start = performance.now();
  const result = await fn();
  return { result, ms: performance.now() - start };
}

test.serial('with Redis stopped, GET /v1/gps/current and POST /v1/gps answer 2xx within 2 s (current from the database)', async (t) => {
  const device = `outage-latency-${Date.now()}`;
  await make(s, dev.token, '/v1/gps', gpsBody({ device_id: device, timestamp: nowSeconds() - 10 }));
  t.is((await s.request('GET', `/v1/gps/current?device_id=${device}`, { token: dev.token })).status, 200);
  await redis.stop();
  try {
    const latencies: number[] = [];
    for (let i = 0; i < 3; i++) {
      const post = await timed(() => s.request('POST', '/v1/gps', { token: dev.token, body: gpsBody({ device_id: device, timestamp: nowSeconds() + i }) }));
      t.is(post.result.status, 201, post.result.text);
      const current = await timed(() => s.request('GET', `/v1/gps/current?device_id=${device}`, { token: dev.token }));
      t.is(current.result.status, 200, current.result.text);
      // The cache is unreachable: the answer is the database's newest point, the one just posted.
      t.is(current.result.body.data.id, post.result.body.data.id);
      latencies.push(post.ms, current.ms);
    }
    const health = await timed(() => s.request('GET', '/v1/health'));
    t.is(health.result.status, 503);
    t.is(health.result.body.services.cache.status, 'down');
    latencies.push(health.ms);
    t.log(`latencies with Redis down (ms): ${latencies.map((ms) => ms.toFixed(0)).join(', ')}`);
    for (const ms of latencies) t.true(ms < 2000, `a request took ${ms.toFixed(0)} ms`);
  } finally {
    await redis.start();
  }
});
