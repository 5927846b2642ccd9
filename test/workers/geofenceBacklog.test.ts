import test from 'ava';
import { randomUUID } from 'node:crypto';
import { redisKey, RedisKeys } from '../../shared/redis';
import { startWorkers } from '../../workers/index';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody, make, nowSeconds } from '../helpers/tracking';
import { eventually } from '../helpers/wait';

// No workers in the stack: the test starts them once the backlog is queued, as after a deploy.
const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' } });

const iso = (seconds: number) => new Date(seconds * 1000).toISOString();

test('points queued while the worker is stopped: every enter and exit, in time order, when it starts', async (t) => {
  const s = stack();
  const developer = await createUser(s.db, { roles: ['role_developer'] });
  const harbour = await make(s, developer.token, '/v1/geofences', {
    name: 'Harbour',
    latitude: 52.52,
    longitude: 13.405,
    radius_km: 1,
  });
  const IN = { latitude: 52.52, longitude: 13.405 };
  const OUT = { latitude: 52.6, longitude: 13.405 }; // ~9 km north
  const t0 = nowSeconds() - 100;
  const track = Array.from({ length: 8 }, (_, i) => ({ ...(i % 2 === 0 ? IN : OUT), timestamp: t0 + i * 2 }));
  const inOrder = await make(s, developer.token, '/v1/devices', { name: `in-order-${randomUUID().slice(0, 8)}` });
  // A tracker flushing its buffer newest first: all of it is queued before evaluation, so all of it counts.
  const newestFirst = await make(s, developer.token, '/v1/devices', { name: `newest-${randomUUID().slice(0, 8)}` });

  // One request and one geofence job per point, as a tracker sends them.
  const queue = s.api.services.queues.queue('geofence');
  const post = async (deviceId: string, point: Record<string, number>) => {
    await make(s, developer.token, '/v1/gps', gpsBody({ device_id: deviceId, ...point }));
    await s.api.services.outbox.drain();
  };
  for (const p of track) await post(inOrder.id, p);
  for (const p of [...track].reverse()) await post(newestFirst.id, p);
  t.is(await queue.getWaitingCount(), 2 * track.length);

  const workers = await startWorkers(s.config, { schedule: false });
  try {
    await eventually(async () => {
      const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'failed');
      return Object.values(c).every((n) => n === 0);
    }, 10_000);

    const expected = track.map((p, i) => [i % 2 === 0 ? 'enter' : 'exit', iso(p.timestamp), harbour.id]);
    for (const device of [inOrder, newestFirst]) {
      const r = await s.request('GET', `/v1/devices/${device.id}/geofence-events?limit=100`, {
        token: developer.token,
      });
      t.is(r.status, 200);
      t.deepEqual(
        r.body.data.reverse().map((e: any) => [e.event, e.occurred_at, e.geofence_id]),
        expected,
        device.name,
      );
      // Nothing is left waiting for evaluation.
      t.is(await s.redis.exists(redisKey(s.config, RedisKeys.geofencePending(device.id))), 0);
    }
  } finally {
    // Last: the workers' database handle is the one the models use while they run.
    await workers.close();
  }
});
