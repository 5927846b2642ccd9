import { DelayedError, type Job } from 'bullmq';
import type { ServiceContext } from '../shared/context';
import { databaseFailureReason, isDatabaseUnavailable, toHttpError } from '../shared/errors';
import { queueDefaults, type QueueName, waitsOutOutages } from '../shared/queues';
import { isRedisUnavailable } from '../shared/redis';
import type { Processor } from './processors/types';

/** The longest a job waiting out an outage goes between two tries. */
export const OUTAGE_RETRY_MAX_DELAY_MS = 30_000;
/** The first wait when the queue's options name no backoff delay. */
const OUTAGE_RETRY_FIRST_DELAY_MS = 1000;

/**
 * Whether a job failed because a dependency is away, not because of the job: the database
 * unreachable, refusing connections, shutting down or not answering in time (what toHttpError maps
 * to a 503 for the api), another 503 a command throws (a store it needs is unavailable), or Redis
 * down or hung. The same job succeeds once the dependency is back.
 */
export function isDependencyOutage(err: unknown): boolean {
  if (toHttpError(err)?.status === 503) return true;
  return isRedisUnavailable(err);
}

/**
 * The wait before try `n` (1 = the first retry) of a job waiting out an outage: the queue's backoff
 * delay doubling, at most OUTAGE_RETRY_MAX_DELAY_MS.
 */
export function outageRetryDelay(queue: QueueName, n: number): number {
  const backoff = queueDefaults[queue].backoff;
  const first = typeof backoff === 'object' && backoff.delay ? backoff.delay : OUTAGE_RETRY_FIRST_DELAY_MS;
  return Math.min(OUTAGE_RETRY_MAX_DELAY_MS, first * 2 ** Math.min(Math.max(n - 1, 0), 30));
}

/**
 * A queue's processor as its BullMQ worker runs it. For a queue whose jobs must not be lost
 * (`waitsOutOutages`), a failure that is a dependency outage does not count as an attempt: the job
 * goes back to the delayed set (BullMQ's moveToDelayed + DelayedError, which leaves attemptsMade as
 * it is) and is tried again after a capped backoff, for as long as the outage lasts. Any other
 * failure (a bug, input the job cannot handle) is an attempt as usual, so such a job still fails
 * after the queue's few `attempts`, outage waits or not, and stays in the failed list.
 */
export function runJob<N extends QueueName>(
  queue: N,
  processor: Processor<N>,
  ctx: ServiceContext,
): (job: Job, token?: string) => Promise<unknown> {
  if (!waitsOutOutages.has(queue)) return (job) => processor(job as never, ctx);
  return async (job, token) => {
    try {
      return await processor(job as never, ctx);
    } catch (err) {
      if (!token || !isDependencyOutage(err)) throw err;
      // Every start counts in attemptsStarted, a failure in attemptsMade: the starts that were
      // neither are this job's waits so far (a stalled run counts too; it only lengthens the wait).
      const waits = Math.max(1, job.attemptsStarted - job.attemptsMade);
      const delayMs = outageRetryDelay(queue, waits);
      // Throws when Redis is the dependency that is away: the job then fails as usual or, when
      // BullMQ cannot record that either, is retried as stalled once Redis is back.
      await job.moveToDelayed(Date.now() + delayMs, token);
      const fields = { queue, jobId: job.id, wait: waits, delayMs, attempts: job.attemptsMade };
      // Every job running during a database outage waits: folded like the outage's other lines.
      if (isDatabaseUnavailable(err)) {
        const reason = databaseFailureReason(err);
        ctx.dbOutages.failure('job waits for a dependency to come back', `${queue}\u0000${reason}`, {
          ...fields,
          err: reason,
        });
      } else ctx.logger.warn({ ...fields, err: (err as Error).message }, 'job waits for a dependency to come back');
      throw new DelayedError();
    }
  };
}
