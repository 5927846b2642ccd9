import test from 'ava';
import { randomUUID } from 'node:crypto';
import { redisKey, RedisKeys } from '../../shared/redis';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody, make, nowSeconds } from '../helpers/tracking';
import { eventually } from '../helpers/wait';

const stack = useStack(test, { workers: true, env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' } });

const iso = (seconds: number) => new Date(seconds * 1000).toISOString();

/**
 * Points × candidate fences of one evaluation were spread into one script call: from about 18,000
 * (point, fence) pairs the call overflowed the stack, the job failed, its points stayed pending for
 * the device and every later point of the device failed with them. 24 points against 1,000 fences
 * (24,000 pairs) is past that; evaluated in bounded runs, each fence still sees its points in order.
 */
test('a batch crossing 1,000 fences: every enter and exit in order, and the device evaluates on', async (t) => {
  const s = stack();
  const developer = await createUser(s.db, { roles: ['role_developer'] });
  const FENCES = 1000;
  const POINTS = 24;
  // Straight into the table (the trigger bumps the fences' version, so the workers' index reloads).
  await s.db('geofences').insert(
    Array.from({ length: FENCES }, (_, i) => ({
      name: `many ${i}`,
      latitude: -33 + (i % 10) * 0.001,
      longitude: 151 + Math.floor(i / 10) * 0.0001,
      radius_km: 5,
    })),
  );
  const IN = { latitude: -33, longitude: 151 }; // inside every fence
  const OUT = { latitude: -33.5, longitude: 151 }; // ~55 km south: outside every one
  const device = await make(s, developer.token, '/v1/devices', { name: `many-${randomUUID().slice(0, 8)}` });
  const t0 = nowSeconds() - 1000;
  const points = Array.from({ length: POINTS }, (_, i) =>
    gpsBody({ device_id: device.id, ...(i % 2 === 0 ? IN : OUT), timestamp: t0 + i * 10 }),
  );
  t.is((await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points } })).status, 201);

  const queue = s.api.services.queues.queue('geofence');
  const events = () => s.db('geofence_events').where('device_id', device.id);
  const count = async () => Number((await events().clone().count('* as n'))[0].n);
  // Until every transition is recorded, or a job has failed (as each did before).
  const settled = (n: number) =>
    eventually(async () => (await queue.getFailedCount()) > 0 || (await count()) === n, 60_000, 200);
  await settled(FENCES * POINTS);
  t.is(await queue.getFailedCount(), 0, (await queue.getFailed())[0]?.failedReason);
  const byEvent = await events().clone().select('event').count('* as n').groupBy('event').orderBy('event');
  t.deepEqual(
    byEvent.map((r) => [r.event, Number(r.n)]),
    [
      ['enter', (FENCES * POINTS) / 2],
      ['exit', (FENCES * POINTS) / 2],
    ],
  );
  // Each fence: enter, exit, enter… at its points' timestamps, none twice, none out of order.
  const { rows: wrong } = await s.db.raw(
    `SELECT geofence_id, occurred_at, event, rn FROM (
       SELECT geofence_id, occurred_at, event, row_number() OVER (PARTITION BY geofence_id ORDER BY occurred_at) AS rn
         FROM geofence_events WHERE device_id = ?) e
      WHERE event <> CASE WHEN rn % 2 = 1 THEN 'enter' ELSE 'exit' END
         OR occurred_at <> ?::timestamptz + (rn - 1) * interval '10 seconds'`,
    [device.id, iso(t0)],
  );
  t.deepEqual(wrong, []);
  t.is(await s.redis.exists(redisKey(s.config, RedisKeys.geofencePending(device.id))), 0, 'nothing left pending');

  // A later point of the same device is evaluated: it enters every fence again.
  const later = t0 + POINTS * 10;
  await make(s, developer.token, '/v1/gps', gpsBody({ device_id: device.id, ...IN, timestamp: later }));
  await settled(FENCES * (POINTS + 1));
  t.is(await queue.getFailedCount(), 0);
  t.is(Number((await events().clone().where('occurred_at', iso(later)).count('* as n'))[0].n), FENCES);
  t.is(await s.redis.llen(redisKey(s.config, RedisKeys.geofenceUnrecorded)), 0);
});
