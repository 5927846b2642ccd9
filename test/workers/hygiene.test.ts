import test from 'ava';
import { QueueName, queueDefaults } from '../../shared/queues';
import { emailRetryDelay } from '../../workers/processors/email';
import { useStack } from '../helpers/stack';
import { eventually } from '../helpers/wait';

const stack = useStack(test, {
  workers: true,
  env: { QUEUE_CONCURRENCY: 'geofence:7,email:2', WORKER_CONCURRENCY: '3' },
});

test('every queue has a worker, with its concurrency from QUEUE_CONCURRENCY or WORKER_CONCURRENCY', (t) => {
  const s = stack();
  const byName = new Map(s.workers!.workers.map((w) => [w.name, w]));
  t.deepEqual([...byName.keys()].sort(), [...Object.values(QueueName)].sort());
  t.is(byName.get('geofence')!.concurrency, 7);
  t.is(byName.get('email')!.concurrency, 2);
  t.is(byName.get('scheduled')!.concurrency, 3);
});

test('every queue that retries backs off exponentially and keeps failed jobs', (t) => {
  for (const [name, opts] of Object.entries(queueDefaults)) {
    t.truthy(opts.removeOnFail, `${name} keeps failed jobs`);
    t.not(opts.removeOnFail, true, `${name} keeps failed jobs`);
    // email: its worker's own exponential backoff, capped (below).
    if ((opts.attempts ?? 1) > 1 && name !== 'email') t.like(opts.backoff, { type: 'exponential' }, name);
  }
  t.like(queueDefaults.email.backoff, { type: 'emailRetry' });
  const delay = emailRetryDelay({ emailRetry: { delayMs: 2000, maxDelayMs: 300_000 } });
  t.deepEqual([1, 2, 3, 4, 5, 8, 9, 1000].map(delay), [2000, 4000, 8000, 16_000, 32_000, 256_000, 300_000, 300_000]);
});

test.serial('a job that throws the same error 3 times lands in failed with the error, after backing off', async (t) => {
  const s = stack();
  // An unknown task makes the scheduled processor throw; a short backoff keeps the test quick.
  const id = await s.api.services.queues.enqueue(
    'scheduled',
    { task: 'noSuchTask' as never },
    {
      backoff: { type: 'exponential', delay: 200 },
    },
  );
  const q = s.api.services.queues.queue('scheduled');
  // State first, then the job: a job read before its state can be a snapshot of the attempt
  // that was still running when the state turned failed.
  await eventually(async () => ((await q.getJobState(id)) === 'failed' ? true : null), 20_000);
  const job = (await q.getJob(id))!;
  t.is(job.attemptsMade, 3);
  t.is(job.failedReason, 'unknown scheduled task noSuchTask');
  t.is(job.stacktrace?.length, 3);
  // Exponential: 200 ms then 400 ms between the attempts, so the whole run took at least 600 ms.
  t.true(job.finishedOn! - job.timestamp >= 600, `${job.finishedOn! - job.timestamp} ms`);
  t.true((await q.getFailed()).some((j) => j.id === id));
});

test.serial(
  'job schedulers: several worker instances registering them still give one scheduler and one pending run per task',
  async (t) => {
    const s = stack();
    const { startWorkers } = await import('../../workers/index');
    const { schedules } = await import('../../shared/queues');
    const [a, b] = await Promise.all([startWorkers(s.config), startWorkers(s.config)]);
    try {
      const q = s.api.services.queues.queue('scheduled');
      const schedulers = await q.getJobSchedulers();
      t.deepEqual(schedulers.map((j) => j.key).sort(), Object.keys(schedules).sort());
      const delayed = await q.getDelayed();
      const perTask = new Map<string, number>();
      for (const j of delayed) perTask.set(j.name, (perTask.get(j.name) ?? 0) + 1);
      for (const task of Object.keys(schedules)) t.true((perTask.get(task) ?? 0) <= 1, task);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  },
);
