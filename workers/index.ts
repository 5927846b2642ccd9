import 'reflect-metadata';
import { Worker } from 'bullmq';
import type Redis from 'ioredis';
import { Config, loadConfigOrExit } from '../shared/config';
import { listenForConfigChanges } from '../shared/caches/systemConfig';
import { createContext, ServiceContext } from '../shared/context';
import { databaseFailureReason, isDatabaseUnavailable } from '../shared/errors';
import { bullPrefix, queueDefaults, QueueName, schedules } from '../shared/queues';
import { createRedis, redisReady } from '../shared/redis';
import { closeSharedPdfRenderer } from './export/pdfRenderer';
import { dataExportProcessor } from './processors/dataExport';
import { emailProcessor, emailRetryDelay } from './processors/email';
import { geofenceProcessor } from './processors/geofence';
import { passwordResetsProcessor } from './processors/passwordResets';
import { scheduledProcessor } from './processors/scheduled';
import { realtimeRequestsProcessor } from './processors/realtimeRequests';
import type { Processor } from './processors/types';
import { runJob } from './outageRetry';
import { loadGeoIp } from '../shared/geoip';
import { AisIngestion } from './ais/ingest';
import { exitOnStartFailure, type Logger } from '../shared/logger';
import { checkSchemaAtStart, warnOnVacuumSettings } from '../shared/schemaCheck';
import { ReleaseDeadline } from '../shared/shutdown';

/** One processor per queue of the registry; the type makes a missing one a compile error. */
export const processors: { [N in QueueName]: Processor<N> } = {
  email: emailProcessor,
  scheduled: scheduledProcessor,
  geofence: geofenceProcessor,
  realtimeRequests: realtimeRequestsProcessor,
  passwordResets: passwordResetsProcessor,
  dataExport: dataExportProcessor,
};

export interface RunningWorkers {
  ctx: ServiceContext;
  workers: Worker[];
  /** The AIS feed consumer of this instance (only the lease holder connects); absent without AIS_FEED_URL. */
  ais?: AisIngestion;
  close(): Promise<void>;
}

/** Fails start-up when a registered queue has no processor (e.g. after a bad merge), or QUEUE_CONCURRENCY names no queue. */
function assertEveryQueueHasProcessor(config: Config): void {
  const unknown = Object.keys(config.queueConcurrency).filter(
    (q) => !(Object.values(QueueName) as string[]).includes(q),
  );
  if (unknown.length) throw new Error(`QUEUE_CONCURRENCY names unknown queues: ${unknown.join(', ')}`);
  const missing = Object.values(QueueName).filter(
    (q) => typeof (processors as Record<string, unknown>)[q] !== 'function',
  );
  if (missing.length) throw new Error(`queues without a processor: ${missing.join(', ')}`);
}

/** Starts one BullMQ Worker per queue and registers the repeatable maintenance jobs. */
/**
 * How often the workers check that every scheduled task still has its job scheduler. The
 * schedulers live in Redis only: a Redis restarted without persistence (as provisioned), a
 * failover or a flush loses them, and nothing would run again until the next worker start.
 */
const SCHEDULE_CHECK_MS = 30_000;
/** How far past its time a scheduler's next occurrence may be without a job before it counts as lost. */
const SCHEDULE_OVERDUE_MS = 60_000;

export async function startWorkers(
  config: Config,
  opts: { schedule?: boolean; scheduleCheckMs?: number; logger?: Logger } = {},
): Promise<RunningWorkers> {
  assertEveryQueueHasProcessor(config);
  const ctx = createContext(config, 'workers', opts.logger);
  // A schema behind this build stops the start here, naming the command to run.
  const stopSchemaRecheck = await checkSchemaAtStart(ctx.db, ctx.logger, { name: 'workers' });
  // Said once per fleet (here, not by every api instance); never in the way of the start.
  void warnOnVacuumSettings(ctx.db, ctx.logger);
  // Nothing to do without Redis (the scheduler registration below needs it): wait for it.
  while (!(await redisReady(ctx.redis, 10_000))) {
    ctx.logger.warn('waiting for redis');
    await new Promise((r) => setTimeout(r, 1000));
  }
  // BullMQ does not close connection instances it is handed; we keep them to close on shutdown.
  const connections: Redis[] = [];
  // System config changes published by the api reach this process's config cache.
  const configSubscriber = createRedis(config);
  ctx.redisErrors.watch(configSubscriber, 'config subscriber');
  connections.push(configSubscriber);
  await listenForConfigChanges(configSubscriber, config, ctx.db, ctx.logger);
  // Jobs running in this process: at shutdown, whether Worker.close() still waits for work or only for Redis.
  let runningJobs = 0;
  const countedRun = async <T>(run: () => Promise<T>): Promise<T> => {
    runningJobs++;
    try {
      return await run();
    } finally {
      runningJobs--;
    }
  };
  const workers = (Object.values(QueueName) as QueueName[]).map((name) => {
    // A queue whose jobs must not be lost waits out a dependency outage (workers/outageRetry.ts).
    const run = runJob(name, processors[name] as Processor<QueueName>, ctx);
    const connection = createRedis(config);
    // Without a listener ioredis prints every connection error as plain text on stderr.
    ctx.redisErrors.watch(connection, `worker ${name}`);
    connections.push(connection);
    const worker = new Worker(name, (job, token) => countedRun(() => run(job, token)), {
      connection,
      prefix: bullPrefix(config),
      concurrency: config.queueConcurrency[name] ?? config.workerConcurrency,
      ...(name === QueueName.email ? { settings: { backoffStrategy: emailRetryDelay(config) } } : {}),
    });
    worker.on('failed', (job, err) => {
      const fields = { queue: name, jobId: job?.id, attempts: job?.attemptsMade };
      // A database outage fails every job that runs meanwhile (and their retries): folded.
      if (!isDatabaseUnavailable(err)) return ctx.logger.warn({ ...fields, err: err.message }, 'job failed');
      const reason = databaseFailureReason(err);
      ctx.dbOutages.failure('job failed', `${name}\u0000${reason}`, { ...fields, err: reason });
    });
    worker.on('error', ctx.redisErrors.listener(`worker ${name}`, 'error'));
    return worker;
  });
  let scheduleCheck: NodeJS.Timeout | undefined;
  if (opts.schedule !== false) {
    const q = ctx.queues.queue(QueueName.scheduled);
    // The queue's job options go into the template: without them every occurrence was kept in
    // Redis for good (about 9,000 a day) and a failed task was not retried.
    const register = (task: string, every: number) =>
      q.upsertJobScheduler(task, { every }, { name: task, data: { task }, opts: queueDefaults[QueueName.scheduled] });
    // At start every scheduler is written (a deploy may change an interval)…
    for (const [task, every] of Object.entries(schedules)) await register(task, every);
    // …and from then on only a missing one, so a running schedule is never moved.
    let checking = false;
    scheduleCheck = setInterval(() => {
      if (checking) return;
      checking = true;
      void (async () => {
        for (const [task, every] of Object.entries(schedules)) {
          const scheduler = await q.getJobScheduler(task);
          // Its next occurrence is a delayed job of its own (BullMQ's id: repeat:<scheduler>:<next>).
          // A scheduler without it (a failover or an eviction took the job but not the entry) never
          // runs again: it counts as lost once the occurrence is well overdue.
          const lost =
            !scheduler ||
            (typeof scheduler.next === 'number' &&
              scheduler.next < Date.now() - SCHEDULE_OVERDUE_MS &&
              !(await q.getJob(`repeat:${task}:${scheduler.next}`)));
          if (!lost) continue;
          await register(task, every);
          ctx.logger.warn(
            { task, every, scheduler: scheduler ? 'next job missing' : 'missing' },
            'job scheduler lost (Redis lost data?); registered again',
          );
        }
      })()
        .catch((err: Error) => ctx.logger.debug({ err: err.message }, 'could not check the job schedulers'))
        .finally(() => (checking = false));
    }, opts.scheduleCheckMs ?? SCHEDULE_CHECK_MS);
    scheduleCheck.unref();
  }
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  // In production geoip-lite's database (about a second) is loaded now, not by the first audit event
  // a request writes. Elsewhere the first public address loads it: a test or development process
  // seldom sees one, and every test file's stack paid ~0.3 s of CPU for it.
  if (config.env === 'production') loadGeoIp();
  ctx.outbox.start();
  const ais = config.aisFeedUrl ? new AisIngestion(ctx) : undefined;
  ais?.start();
  ctx.logger.info({ queues: Object.values(QueueName) }, 'workers ready');
  return {
    ctx,
    workers,
    ais,
    async close() {
      stopSchemaRecheck();
      const started = Date.now();
      clearInterval(scheduleCheck);
      // Gives the feed lease back at once, so another instance takes over without waiting for expiry.
      if (ais) await new ReleaseDeadline(ctx.logger, AIS_RELEASE_MS).step('AIS feed', () => ais.close());
      // Worker.close() stops taking jobs and waits for the running ones to finish. A job still running
      // at PM2's kill_timeout dies with the process and is retried as stalled by another worker.
      await closeWorkers(workers, () => runningJobs, ctx.logger);
      ctx.logger.info({ ms: Date.now() - started }, 'workers drained');
      await closeSharedPdfRenderer();
      for (const c of connections) c.disconnect();
      await ctx.close();
    },
  };
}

/** How long the AIS feed may take to give its lease back at shutdown (Redis may be down). */
const AIS_RELEASE_MS = 1000;
/** How long Worker.close() may go on with no job running here before the workers are left behind. */
const IDLE_CLOSE_MS = 2000;

/**
 * Closes the BullMQ workers: they stop taking jobs, and the jobs running here finish, however long
 * they take (PM2's kill_timeout bounds that). Worker.close() also waits on Redis, and with Redis
 * down or hung it waited for as long as the outage lasted, with nothing running: once no job has
 * run here for IDLE_CLOSE_MS, the close is abandoned (logged) and the process goes on to exit. A
 * job whose completion could not be recorded in Redis is retried as stalled once Redis is back.
 */
async function closeWorkers(workers: Worker[], runningJobs: () => number, logger: Logger): Promise<void> {
  const closed = Promise.all(workers.map((w) => w.close())).then(
    () => true,
    () => true,
  );
  let idleSince = 0;
  for (;;) {
    const done = await Promise.race([closed, new Promise<false>((r) => setTimeout(() => r(false), 250))]);
    if (done) return;
    if (runningJobs() > 0) {
      idleSince = 0;
      continue;
    }
    idleSince ||= Date.now();
    if (Date.now() - idleSince >= IDLE_CLOSE_MS) {
      logger.warn(
        { waitedMs: IDLE_CLOSE_MS },
        'workers still closing with no job running (Redis unreachable?); going on',
      );
      return;
    }
  }
}

if (require.main === module) {
  const config = loadConfigOrExit();
  startWorkers(config)
    .then((running) => {
      const shutdown = (signal: string) => {
        running.ctx.logger.info({ signal }, 'workers draining');
        running.close().then(
          // 0, or 1 when the process stops on a schema behind the build (shared/schemaCheck.ts).
          () => process.exit(),
          (err) => {
            running.ctx.logger.error({ err }, 'workers drain failed');
            process.exit(1);
          },
        );
      };
      process.once('SIGTERM', () => shutdown('SIGTERM'));
      process.once('SIGINT', () => shutdown('SIGINT'));
    })
    .catch((err) => exitOnStartFailure('workers', config.logLevel, err));
}
