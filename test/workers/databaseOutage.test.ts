import test from 'ava';
import type { Job } from 'bullmq';
import Redis from 'ioredis';
import { SUBSCRIBER } from '../helpers/pushes';
import { Model } from 'objection';
import { randomUUID } from 'node:crypto';
import type { QueueName } from '../../shared/queues';
import { startWorkers, type RunningWorkers } from '../../workers/index';
import { freshEmail } from '../helpers/accounts';
import { createUser } from '../helpers/factories';
import { useStack, type Stack } from '../helpers/stack';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy';
import { gpsBody, make, nowSeconds } from '../helpers/tracking';
import { eventually } from '../helpers/wait';

// No workers in the stack: the only ones are each test's, whose database is behind a proxy the
// test takes down (a PostgreSQL that refuses connections) while the api keeps its own.
const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' } });

/** Workers whose database connections go through a proxy the test can take down and bring back. */
async function proxiedWorkers(s: Stack): Promise<{ proxy: TcpProxy; workers: RunningWorkers; close(): Promise<void> }> {
  const db = new URL(s.config.databaseUrl);
  const proxy = await startTcpProxy(db.hostname, Number(db.port || 5432));
  db.hostname = '127.0.0.1';
  db.port = String(proxy.port);
  const workers = await startWorkers({ ...s.config, databaseUrl: db.toString() }, { schedule: false });
  // The workers' context bound Objection's models to its knex: the api's stays the test's.
  Model.knex(s.db);
  return {
    proxy,
    workers,
    async close() {
      await proxy.up();
      await workers.close();
      Model.knex(s.db);
      await proxy.close();
    },
  };
}

/** The job of `queue` whose data matches, in whatever state it is. */
async function findJob(s: Stack, queue: QueueName, match: (data: any) => boolean): Promise<Job | undefined> {
  const jobs = await s.api.services.queues
    .queue(queue)
    .getJobs(['waiting', 'active', 'delayed', 'prioritized', 'failed', 'completed']);
  return jobs.find((j) => j && match(j.data));
}

test.serial(
  'a geofence job outlives a database outage longer than its attempts: the enter event comes without another point',
  async (t) => {
    const s = stack();
    const developer = await createUser(s.db, { roles: ['role_developer'] });
    const sub = new Redis(s.config.redisUrl, SUBSCRIBER);
    const pushed: Array<{ geofence_id: string; event: string }> = [];
    sub.on('message', (_c, raw) => pushed.push(JSON.parse(raw).data));
    await sub.subscribe(`${s.config.redisPrefix}ws:geofence`);
    const w = await proxiedWorkers(s);
    try {
      const g = await make(s, developer.token, '/v1/geofences', {
        name: 'Mooring',
        latitude: 20,
        longitude: 13.405,
        radius_km: 5,
      });
      const device = `parked-${randomUUID().slice(0, 8)}`;
      await w.proxy.down();
      // The api takes the point (its database is up) and its relay enqueues the job; the device
      // sends nothing more (a parked boat).
      const point = await make(
        s,
        developer.token,
        '/v1/gps',
        gpsBody({ device_id: device, latitude: 20.001, longitude: 13.405, timestamp: nowSeconds() }),
      );
      await s.api.services.outbox.drain();
      // More tries than the queue's 3 attempts (1 s + 2 s of backoff apart), all refused.
      const job = await eventually(
        async () => {
          const j = await findJob(s, 'geofence', (d) => d.gpsPointIds.includes(point.id));
          return j && (j.attemptsStarted >= 4 || j.finishedOn) ? j : undefined;
        },
        20_000,
        100,
      );
      t.falsy(job.finishedOn, `the job ended: ${job.failedReason}`);
      t.is(job.attemptsMade, 0, 'an outage uses up none of its attempts');
      await w.proxy.up();
      // The job's next try (at most 8 s later here) evaluates the point: row and push.
      await eventually(() => pushed.some((p) => p.geofence_id === g.id && p.event === 'enter'), 30_000, 100);
      t.deepEqual(
        (await s.db('geofence_events').where('geofence_id', g.id)).map((e) => [e.event, e.gps_point_id]),
        [['enter', point.id]],
      );
    } finally {
      sub.disconnect();
      await w.close();
    }
  },
);

test.serial(
  'a password reset answered 202 is mailed after a database outage longer than its job’s attempts',
  async (t) => {
    const s = stack();
    const user = await createUser(s.db, { email: freshEmail('outage') });
    const w = await proxiedWorkers(s);
    try {
      await w.proxy.down();
      const r = await s.request('POST', '/v1/auth/reset-password/request', { body: { email: user.email } });
      t.is(r.status, 202);
      // The api's relay hands the request to the queue and deletes its outbox row: from here on
      // the job is all there is of it.
      await s.api.services.outbox.drain();
      // The queue's 5 attempts, 2 s doubling apart, are all refused: the 5th start comes about
      // 30 s after the first. Once it is over the job must still be there, waiting.
      const job = await eventually(
        async () => {
          const j = await findJob(s, 'passwordResets', (d) => d.email === user.email);
          if (!j || j.attemptsStarted < 5) return undefined;
          return j.finishedOn || (await j.getState()) === 'delayed' ? j : undefined;
        },
        60_000,
        100,
      );
      t.falsy(job.finishedOn, `the job ended: ${job.failedReason}`);
      t.is(job.attemptsMade, 0, 'an outage uses up none of its attempts');
      await w.proxy.up();
      // Its next try would come up to 30 s later: run it now.
      await job.promote();
      await eventually(
        async () =>
          (await s.db('email_outbox').where({ to_address: user.email.toLowerCase(), template: 'password_reset' }))
            .length === 1,
        15_000,
        100,
      );
      t.pass();
    } finally {
      await w.close();
    }
  },
);

test.serial('a job failing for another reason still fails after its queue’s attempts', async (t) => {
  const s = stack();
  const w = await proxiedWorkers(s);
  try {
    // Not a point id: the database refuses the statement (22P02), a failure no wait mends.
    const id = await s.api.services.queues.enqueue('geofence', { gpsPointIds: ['not-a-uuid'] });
    const job = await eventually(
      async () => {
        const j = await s.api.services.queues.queue('geofence').getJob(id);
        return j?.finishedOn ? j : undefined;
      },
      15_000,
      100,
    );
    t.is(await job.getState(), 'failed');
    t.is(job.attemptsMade, 3);
    t.regex(job.failedReason, /invalid input syntax for type uuid/);
  } finally {
    await w.close();
  }
});
