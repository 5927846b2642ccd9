import test from 'ava';
import type Redis from 'ioredis';
import { latestGps } from '../../shared/caches/gpsLatest';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody } from '../helpers/tracking';

const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_API_KEY: '100000' } });

/** The stack's Redis client with its reads counted (GET, or MGET of a value and its generation). */
function countingGets(redis: Redis): { redis: Redis; gets: () => number } {
  let gets = 0;
  const counted = new Proxy(redis, {
    get(target, prop, receiver) {
      if (prop === 'get' || prop === 'mget') {
        const read = (target[prop] as (...a: unknown[]) => unknown).bind(target);
        return (...args: unknown[]) => {
          gets++;
          return read(...args);
        };
      }
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  return { redis: counted, gets: () => gets };
}

test('latest-point reads of one turn share one cache read per key; the next turn reads again', async (t) => {
  const s = stack();
  const owner = await createUser(s.db, { roles: ['role_developer'] });
  const device = `shared-${Date.now()}`;
  const t0 = Math.floor(Date.now() / 1000) - 60;
  const first = await s.request('POST', '/v1/gps', {
    token: owner.token,
    body: gpsBody({ device_id: device, timestamp: t0 }),
  });
  t.is(first.status, 201);
  const { redis, gets } = countingGets(s.redis);
  const [a, b, c, other] = await Promise.all([
    latestGps(s.db, redis, s.config, device),
    latestGps(s.db, redis, s.config, device),
    latestGps(s.db, redis, s.config, device),
    latestGps(s.db, redis, s.config, `${device}-none`),
  ]);
  t.is(gets(), 2);
  t.is(a, b);
  t.is(a, c);
  t.is(a!.id, first.body.data.id);
  t.true(Object.isFrozen(a));
  t.is(other, null);
  // A point written after the turn is seen by the next read.
  const second = await s.request('POST', '/v1/gps', {
    token: owner.token,
    body: gpsBody({ device_id: device, timestamp: t0 + 1 }),
  });
  t.is(second.status, 201);
  t.is((await latestGps(s.db, redis, s.config, device))!.id, second.body.data.id);
  t.is(gets(), 3);
  // Over HTTP, concurrent callers get the same answer.
  const key = await createKey({ userId: owner.id, scopes: ['gps:read'], name: 'reader' });
  const answers = await Promise.all(
    Array.from({ length: 5 }, () => s.request('GET', `/v1/gps/current?device_id=${device}`, { token: key.key })),
  );
  for (const r of answers) t.deepEqual(r.body.data, second.body.data);
});
