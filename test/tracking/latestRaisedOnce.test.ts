import test from 'ava';
import Redis from 'ioredis';
import { recordLatestGps } from '../../shared/caches/gpsLatest';
import { SIDE_EFFECT_OUTBOX } from '../../shared/outbox';
import type { GpsPointRow } from '../../shared/presenters/gpsPoint';
import { redisKey, RedisKeys } from '../../shared/redis';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { countRows, gpsBody, nowSeconds } from '../helpers/tracking';
import { eventually } from '../helpers/wait';

const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_API_KEY: '100000' } });

/** The stack's Redis client with its latest-point script calls counted. */
function countingWrites(redis: Redis): { redis: Redis; writes: () => number } {
  let writes = 0;
  const counted = new Proxy(redis, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver);
      if (prop === 'gpsLatestWrite' && typeof v === 'function')
        return (...args: unknown[]) => {
          writes++;
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  return { redis: counted, writes: () => writes };
}

function pointRow(deviceId: string, id: string, seconds: number): GpsPointRow {
  return {
    id,
    device_id: deviceId,
    trip_id: null,
    latitude: 52.5,
    longitude: 13.4,
    altitude: null,
    heading: null,
    timestamp: new Date(seconds * 1000),
    speed_kmh: 0,
    speed_mps: 0,
    speed_mph: 0,
    speed_knots: 0,
    pdop: null,
    hdop: null,
    vdop: null,
    created_at: new Date(),
  };
}

test('a point offered again after it raised the cache costs no second write', async (t) => {
  const s = stack();
  const { redis, writes } = countingWrites(s.redis);
  const device = `raised-${Date.now()}`;
  const t0 = nowSeconds() - 100;
  const a = pointRow(device, '00000000-0000-4000-8000-00000000000a', t0);
  const b = pointRow(device, '00000000-0000-4000-8000-00000000000b', t0 + 1);

  await recordLatestGps(s.db, redis, s.config, [a]);
  t.is(writes(), 1);
  const deviceKey = redisKey(s.config, RedisKeys.gpsLatestDevice(device));
  t.regex((await s.redis.get(deviceKey)) ?? '', new RegExp(a.id));

  // The relay's second offer of the same point: answered from memory.
  await recordLatestGps(s.db, redis, s.config, [a]);
  t.is(writes(), 1);

  // A batch with a new point writes again, and only the new point moves the cache.
  await recordLatestGps(s.db, redis, s.config, [b]);
  t.is(writes(), 2);
  t.regex((await s.redis.get(deviceKey)) ?? '', new RegExp(b.id));

  // A write that failed is not remembered: the next offer of the point writes it.
  const c = pointRow(device, '00000000-0000-4000-8000-00000000000c', t0 + 2);
  const closed = s.redis.duplicate();
  closed.disconnect();
  const failed = countingWrites(closed);
  await t.throwsAsync(recordLatestGps(s.db, failed.redis, s.config, [c]));
  t.is(failed.writes(), 1);
  await recordLatestGps(s.db, redis, s.config, [c]);
  t.is(writes(), 3);
  t.regex((await s.redis.get(deviceKey)) ?? '', new RegExp(c.id));
});

test('a posted point raises the latest-point cache once, not again when the relay carries it out', async (t) => {
  const s = stack();
  const owner = await createUser(s.db, { roles: ['role_developer'] });
  const device = `relayed-${Date.now()}`;
  const deviceKey = redisKey(s.config, RedisKeys.gpsLatestDevice(device));
  // The api's own connection, which both the request and the outbox relay (no workers here) write
  // the cache through. Its script is defined by a first write (of another device), then counted.
  // (MONITOR saw every client's writes, but an echo arriving with its own OK reply, in one read,
  // raced ioredis into "Command queue state error" under the suite's load, and the monitoring
  // connection it left open held the test's worker.)
  const apiRedis = s.api.services.redis as Redis & { gpsLatestWrite(...args: unknown[]): Promise<unknown> };
  await recordLatestGps(s.db, apiRedis, s.config, [
    pointRow(`${device}-other`, '00000000-0000-4000-8000-0000000000ff', nowSeconds() - 50),
  ]);
  const write = apiRedis.gpsLatestWrite;
  const scriptCalls: unknown[][] = [];
  apiRedis.gpsLatestWrite = (...args: unknown[]) => {
    if (args.includes(deviceKey)) scriptCalls.push(args);
    return write.apply(apiRedis, args);
  };
  try {
    const posted = await s.request('POST', '/v1/gps', {
      token: owner.token,
      body: gpsBody({ device_id: device, timestamp: nowSeconds() - 5 }),
    });
    t.is(posted.status, 201);
    // The relay has carried the point out once its outbox row is gone (it deletes the row in the
    // transaction that publishes, raises the cache and queues the geofence job).
    await eventually(async () => (await countRows(s.db(SIDE_EFFECT_OUTBOX).where('kind', 'gpsPoints'))) === 0);
    t.is(scriptCalls.length, 1, `latest-point writes for the device: ${scriptCalls.length}`);
    const key = await createKey({ userId: owner.id, scopes: ['gps:read'], name: 'reader' });
    const current = await s.request('GET', `/v1/gps/current?device_id=${device}`, { token: key.key });
    t.is(current.status, 200);
    t.is(current.body.data.id, posted.body.data.id);
  } finally {
    apiRedis.gpsLatestWrite = write;
  }
});
