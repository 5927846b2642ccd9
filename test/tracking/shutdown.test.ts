import test from 'ava';
import { Queue } from 'bullmq';
import { bullPrefix } from '../../shared/queues';
import { createRedis } from '../../shared/redis';
import { createUser } from '../helpers/factories';
import { startStack } from '../helpers/stack';

// Serial: each case starts its own stack, and Objection binds its models to one database per process.
for (const [label, delayMs] of [
  ['closing at once', 0],
  ['closing while the relay may be mid-pass', 21],
] as const) {
  test.serial(`a point accepted just before shutdown still gets its geofence job (${label})`, async (t) => {
    const s = await startStack();
    try {
      const user = await createUser(s.db, { roles: ['role_api_full_access'] });
      const r = await s.request('POST', '/v1/gps', {
        token: user.token,
        body: {
          latitude: 52.5,
          longitude: 13.4,
          altitude: 30,
          heading: 90,
          timestamp: Math.floor(Date.now() / 1000),
          speed_kmh: 10,
          speed_mps: 2.78,
          speed_mph: 6.21,
          speed_knots: 5.4,
        },
      });
      t.is(r.status, 201, r.text);
      // Closing waits for the relay's pass in flight, then drains what the outbox still holds.
      if (delayMs) await new Promise((res) => setTimeout(res, delayMs));
      await s.api.close();
      const redis = createRedis(s.config);
      const queue = new Queue('geofence', { connection: redis, prefix: bullPrefix(s.config) });
      const jobs = await queue.getJobs(['waiting', 'delayed', 'prioritized']);
      t.true(jobs.some((j) => (j.data as { gpsPointIds: string[] }).gpsPointIds.includes(r.body.data.id)));
      await queue.close();
      redis.disconnect();
    } finally {
      await s.close();
    }
  });
}
