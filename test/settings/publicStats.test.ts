import test from 'ava';
import { setClockOffset } from '../../shared/clock';
import { readPublicStats } from '../../shared/queries/publicStats';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody, make } from '../helpers/tracking';

/** GET /v1/stats/public (decisions.md): counts without authentication, cached for a minute. */
const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' } });

test.serial('public stats: the counts, without authentication, cached for a minute', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const device = await make(s, dev.token, '/v1/devices', { name: 'stats-boat' });
  await make(s, dev.token, '/v1/trips', { name: 'stats-trip' });
  await make(s, dev.token, '/v1/geofences', { name: 'stats-fence', latitude: 1, longitude: 1, radius_km: 1 });
  for (let i = 0; i < 3; i++) await make(s, dev.token, '/v1/gps', gpsBody({ device_id: device.id }));

  const r = await s.request('GET', '/v1/stats/public');
  t.is(r.status, 200, r.text);
  t.is(r.headers.get('cache-control'), 'public, max-age=60');
  const users = Number((await s.db('users').whereNull('deleted_at').count({ n: '*' }))[0].n);
  t.deepEqual(r.body, {
    users,
    devices: 1,
    trips: { total: 1, active: 0 },
    gps_points: 3,
    geofences: 1,
    guilds: 0,
  });
  const ttl = await s.redis.ttl(`${s.config.redisPrefix}stats:public`);
  t.true(ttl > 0 && ttl <= 60, String(ttl));

  // Within the minute the cached figures are served.
  await make(s, dev.token, '/v1/devices', { name: 'stats-boat-2' });
  t.is((await s.request('GET', '/v1/stats/public')).body.devices, 1);
  // Once the minute is over (the key expired, and the process's own copy is a minute old), they are counted again.
  await s.redis.del(`${s.config.redisPrefix}stats:public`);
  setClockOffset(61_000);
  let fresh;
  try {
    fresh = await s.request('GET', '/v1/stats/public');
  } finally {
    setClockOffset(0);
  }
  t.is(fresh.status, 200, fresh.text);
  t.is(fresh.body.devices, 2);
  t.is(fresh.headers.get('cache-control'), 'public, max-age=60');
  // …and cached again for the next minute.
  const again = await s.redis.ttl(`${s.config.redisPrefix}stats:public`);
  t.true(again > 0 && again <= 60, String(again));
});

test.serial('the counts come from the trigger-kept row counters, not from scanning the tables', async (t) => {
  const s = stack();
  await s.redis.del(`${s.config.redisPrefix}stats:public`);
  const before = await readPublicStats(s.db);
  // A counter row the triggers did not write shows in the figures: they are read, not counted.
  await s.db('row_counters').insert({ counter: 'gps_points', shard: 999, n: 1_000_000 });
  try {
    const after = await readPublicStats(s.db);
    t.is(after.gps_points, before.gps_points + 1_000_000);
    t.is(after.devices, before.devices);
  } finally {
    await s.db('row_counters').where({ counter: 'gps_points', shard: 999 }).delete();
  }
});

test.serial(
  'a process reads the shared figures once per minute, not per request, and keeps them while Redis does',
  async (t) => {
    const s = stack();
    const key = `${s.config.redisPrefix}stats:public`;
    await s.redis.del(key);
    setClockOffset(120_000); // past whatever the process kept from an earlier test
    try {
      const first = await s.request('GET', '/v1/stats/public');
      t.is(first.status, 200);
      // Another instance's figures appear in Redis for the same minute: this process does not ask again.
      await s.redis.set(key, JSON.stringify({ ...first.body, devices: 4242 }), 'KEEPTTL');
      t.is((await s.request('GET', '/v1/stats/public')).body.devices, first.body.devices);
      // Once the minute is over, it reads Redis again (here: the other instance's, re-stored for a minute).
      await s.redis.set(key, JSON.stringify({ ...first.body, devices: 4343 }), 'EX', 60);
      setClockOffset(120_000 + 61_000);
      t.is((await s.request('GET', '/v1/stats/public')).body.devices, 4343);
    } finally {
      setClockOffset(0);
    }
  },
);
