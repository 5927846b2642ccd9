import test from 'ava';
import { purgeExpiredGpsPoints } from '../../shared/commands/gpsRetention';
import { scheduledTasks } from '../../workers/processors/scheduled';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody, make, nowSeconds, once } from '../helpers/tracking';

const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' } });
const users = once(async () => {
  const s = stack();
  return {
    developer: await createUser(s.db, { roles: ['role_developer'] }),
    admin: await createUser(s.db, { roles: ['role_admin'] }),
  };
});
const setConfig = (s: ReturnType<typeof stack>, key: string, value: unknown) =>
  s
    .db('system_config')
    .where('key', key)
    .update({ value: JSON.stringify(value) });

// Serial and first: the api reads gps.latest_cache_seconds at its first GPS write.
test.serial('gps.latest_cache_seconds sets the lifetime of the latest-point cache', async (t) => {
  const s = stack();
  const { developer } = await users();
  await setConfig(s, 'gps.latest_cache_seconds', 42);
  const device = 'ttl-device';
  await make(s, developer.token, '/v1/gps', gpsBody({ device_id: device }));
  const ttl = await s.redis.ttl(`${s.config.redisPrefix}gps:latest:device:${device}`);
  t.true(ttl > 35 && ttl <= 42, String(ttl));
});

test('trips.default_gps_logging is the default of gps_logging_enabled for new trips (seeded false)', async (t) => {
  const s = stack();
  const { developer, admin } = await users();
  t.is((await make(s, developer.token, '/v1/trips', { name: 'default' })).gps_logging_enabled, false);
  // Through the API, as an operator changes it: the process's config cache is cleared at once.
  const patch = (value: boolean) =>
    s.request('PATCH', '/v1/system-config/trips.default_gps_logging', { token: admin.token, body: { value } });
  t.is((await patch(true)).status, 200);
  try {
    t.is((await make(s, developer.token, '/v1/trips', { name: 'configured' })).gps_logging_enabled, true);
    t.is(
      (await make(s, developer.token, '/v1/trips', { name: 'explicit', gps_logging_enabled: false }))
        .gps_logging_enabled,
      false,
    );
  } finally {
    t.is((await patch(false)).status, 200);
  }
  t.is((await make(s, developer.token, '/v1/trips', { name: 'default again' })).gps_logging_enabled, false);
});

test('the purgeGpsPoints task deletes points older than gps.retention_days that belong to no trip', async (t) => {
  const s = stack();
  const { developer } = await users();
  const trip = await make(s, developer.token, '/v1/trips', { name: 'kept track' });
  const old = nowSeconds() - 400 * 86400;
  const r = await s.request('POST', '/v1/gps/batch', {
    token: developer.token,
    body: {
      points: [
        gpsBody({ device_id: 'ret', timestamp: old }),
        gpsBody({ device_id: 'ret', timestamp: old, trip_id: trip.id }),
        gpsBody({ device_id: 'ret', timestamp: nowSeconds() - 10 * 86400 }),
      ],
    },
  });
  const [expired, onTrip, recent] = r.body.data.accepted.map((a: { id: string }) => a.id);
  // The device's latest point cached: the purge drops the cache with the points.
  await s.redis.set(`${s.config.redisPrefix}gps:latest:device:ret`, 'cached');
  const result = await scheduledTasks.purgeGpsPoints(s.api.services);
  t.true(result.deleted >= 1);
  t.is(await s.redis.exists(`${s.config.redisPrefix}gps:latest:device:ret`), 0);
  const left = (await s.db('gps_points').whereIn('id', [expired, onTrip, recent]).select('id')).map((x) => x.id).sort();
  t.deepEqual(left, [onTrip, recent].sort());
  // Retention off (0) keeps everything.
  await setConfig(s, 'gps.retention_days', 0);
  t.deepEqual(await purgeExpiredGpsPoints(s.db), { deleted: 0 });
  await setConfig(s, 'gps.retention_days', 5);
  t.deepEqual(await purgeExpiredGpsPoints(s.db, 1), { deleted: 1 });
  t.is((await s.db('gps_points').whereIn('id', [onTrip, recent]).select('id')).length, 1);
});
