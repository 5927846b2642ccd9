import test from 'ava';
import { trackingConfig } from '../../shared/caches/trackingConfig';
import { createUser, TestUser } from '../helpers/factories';
import { FakePegel, startFakePegel } from '../helpers/fakePegel';
import { PrivateRedis, startPrivateRedis } from '../helpers/redisServer';
import { Stack, startStack } from '../helpers/stack';
import { eventually, sleep } from '../helpers/wait';

/**
 * A dead Redis never stalls these features: the config cache falls back to a one-second lifetime,
 * public stats and water levels are computed or fetched directly. One private redis-server that
 * the tests stop and restart: serial.
 */
let redis: PrivateRedis;
let fake: FakePegel;
let s: Stack;
let admin: TestUser;

test.before(async () => {
  redis = await startPrivateRedis();
  fake = await startFakePegel();
  s = await startStack({ env: { REDIS_URL: redis.url, PEGEL_API_URL: fake.url, RATE_LIMIT_USER: '100000' } });
  admin = await createUser(s.db, { roles: ['role_admin'] });
});
test.after.always(async () => {
  await redis?.start().catch(() => undefined);
  await s?.close();
  await redis?.stop();
  await fake?.close();
});

const setDirectly = (value: number) =>
  s
    .db('system_config')
    .where('key', 'gps.latest_cache_seconds')
    .update({ value: JSON.stringify(value) });

test.serial(
  'the config cache trusts pub/sub while subscribed, and one second at most while Redis is down',
  async (t) => {
    t.is((await trackingConfig(s.db)).latestCacheSeconds, 300);
    await setDirectly(120);
    await sleep(1200);
    t.is((await trackingConfig(s.db)).latestCacheSeconds, 300, 'subscribed: kept until a change is published');
    await redis.stop();
    try {
      await setDirectly(130);
      const started = Date.now();
      await eventually(async () => (await trackingConfig(s.db)).latestCacheSeconds === 130, 3000);
      t.true(Date.now() - started < 2500);
      // A PATCH still answers (the publish fails and is logged) and this process sees the value.
      const patched = await s.request('PATCH', '/v1/system-config/gps.latest_cache_seconds', {
        token: admin.token,
        body: { value: 140 },
      });
      t.is(patched.status, 200);
      t.is((await trackingConfig(s.db)).latestCacheSeconds, 140);
    } finally {
      await redis.start();
    }
    // Back on pub/sub after the reconnection: the cache was dropped and PATCHes invalidate it again.
    await eventually(
      async () => {
        const r = await s.request('PATCH', '/v1/system-config/gps.latest_cache_seconds', {
          token: admin.token,
          body: { value: 300 },
        });
        return r.status === 200 && (await trackingConfig(s.db)).latestCacheSeconds === 300;
      },
      10_000,
      200,
    );
    t.pass();
  },
);

test.serial('with Redis down, public stats and water levels still answer promptly', async (t) => {
  await redis.stop();
  try {
    let started = Date.now();
    const stats = await s.request('GET', '/v1/stats/public');
    t.is(stats.status, 200);
    t.true(Date.now() - started < 2500, `stats took ${Date.now() - started} ms`);
    t.is(typeof stats.body.users, 'number');

    started = Date.now();
    const stations = await s.request('GET', '/v1/pegel/stations?water=RHEIN', { token: admin.token });
    t.is(stations.status, 200, stations.text);
    t.true(Date.now() - started < 5000, `pegel took ${Date.now() - started} ms`);
    t.is(stations.headers.get('x-cache'), 'miss');
    t.deepEqual(stations.body.map((x: { shortname: string }) => x.shortname).sort(), ['BONN', 'KÖLN']);

    // The answer it fetched is fresh for FRESH_SECONDS: served again without asking upstream.
    const asked = fake.requests.length;
    const again = await s.request('GET', '/v1/pegel/stations?water=RHEIN', { token: admin.token });
    t.is(again.status, 200, again.text);
    t.is(again.headers.get('x-cache'), 'hit');
    t.deepEqual(again.body, stations.body);
    t.is(fake.requests.length, asked);
  } finally {
    await redis.start();
  }
});
