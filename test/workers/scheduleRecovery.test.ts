import test from 'ava';
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { bullPrefix, queueDefaults, QueueName, schedules } from '../../shared/queues';
import { RunningWorkers, startWorkers } from '../../workers/index';
import { PrivateRedis, startPrivateRedis } from '../helpers/redisServer';
import { Stack, startStack } from '../helpers/stack';
import { eventually } from '../helpers/wait';

/**
 * The job schedulers live in Redis only. A Redis that comes back empty (restarted without
 * persistence, as provisioned) must not stop every scheduled task until the next worker start:
 * the workers notice the missing schedulers and register them again. Private redis-server: serial.
 */
let redis: PrivateRedis;
let s: Stack;
let workers: RunningWorkers | undefined;
let connection: Redis;
let queue: Queue;

test.before(async () => {
  redis = await startPrivateRedis();
  s = await startStack({ env: { REDIS_URL: redis.url } });
  workers = await startWorkers(s.config, { scheduleCheckMs: 200 });
  connection = new Redis(redis.url, { maxRetriesPerRequest: null });
  connection.on('error', () => undefined);
  queue = new Queue(QueueName.scheduled, { connection, prefix: bullPrefix(s.config) });
  // Without a listener BullMQ prints the queue's connection errors (the restarts below) to stderr.
  queue.on('error', () => undefined);
});
test.after.always(async () => {
  await redis?.start().catch(() => undefined);
  await workers?.close();
  await queue?.close();
  connection?.disconnect();
  await s?.close();
  await redis?.stop();
});

const registered = async () => {
  const found = await Promise.all(Object.keys(schedules).map((task) => queue.getJobScheduler(task)));
  return found.every(Boolean);
};

test.serial(
  "every scheduled occurrence carries the queue's options: kept finished jobs are bounded, failures retried",
  async (t) => {
    for (const task of Object.keys(schedules)) {
      const scheduler = await queue.getJobScheduler(task);
      const next = await queue.getJob(`repeat:${task}:${scheduler!.next}`);
      t.truthy(next, task);
      const { removeOnComplete, removeOnFail, attempts, backoff } = queueDefaults[QueueName.scheduled];
      t.like(next!.opts, { removeOnComplete, removeOnFail, attempts, backoff }, task);
    }
  },
);

test.serial('a Redis that lost its data gets every job scheduler back, and the tasks run again', async (t) => {
  t.true(await registered());
  await redis.stop();
  await redis.start();
  t.false(await registered(), 'the restarted Redis is empty');
  t.true(await eventually(registered, 10_000), 'every scheduler is registered again');
  // The fastest task (chatAutoSync, 15 s) comes due at once after registration: it runs.
  const ran = await eventually(async () => (await queue.getCompletedCount()) > 0 || undefined, 20_000);
  t.true(ran);
});

test.serial('a scheduler whose next job was lost (the entry kept) is registered again once overdue', async (t) => {
  const task = 'expireBans';
  const before = await queue.getJobScheduler(task);
  t.truthy(before);
  // The entry survives, its pending occurrence does not (a failover or an eviction), and that
  // occurrence is long past: nothing would ever run the task again.
  const jobId = `repeat:${task}:${before!.next}`;
  const base = `${bullPrefix(s.config)}:${QueueName.scheduled}`;
  await connection.multi().del(`${base}:${jobId}`).zrem(`${base}:delayed`, jobId).exec();
  t.falsy(await queue.getJob(jobId));
  const stale = Date.now() - 5 * 60_000;
  await connection.zadd(`${base}:repeat`, stale, task);
  t.is((await queue.getJobScheduler(task))!.next, stale);
  const fresh = await eventually(async () => {
    const now = await queue.getJobScheduler(task);
    return now && now.next !== stale && (await queue.getJob(`repeat:${task}:${now.next}`)) ? now : undefined;
  }, 10_000);
  t.truthy(fresh);
});
