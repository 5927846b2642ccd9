import { JobsOptions, Queue, QueueEvents } from 'bullmq';
import type Redis from 'ioredis';
import type { Config } from './config';
import { redisKey, RedisErrorLog, RedisKeys, WAIT_FOR_REDIS } from './redis';

/**
 * Queue registry: every BullMQ queue, its job payload type and its default job options.
 * Payloads carry ids, not rows; a job re-reads what it needs. Enqueue after the commit.
 */
import { QueueName } from './queueNames';

export { QueueName };

/** Scheduled maintenance tasks, run by the `scheduled` queue's repeatable job schedulers. */
export type ScheduledTask =
  | 'cleanupSessions'
  | 'expireBans'
  | 'purgeDeletedAccounts'
  | 'cleanupAccountTokens'
  | 'cleanupTwoFactorSetups'
  | 'cleanupOAuth'
  | 'cleanupAttemptCounters'
  | 'compactRowCounters'
  | 'purgeGpsPoints'
  | 'purgeAuditEvents'
  | 'refreshIntegrationTokens'
  | 'chatAutoSync'
  | 'requeueEmails'
  | 'purgeSentEmails';

/** Who sent a realtime request: enough to attribute it, never a credential. */
export interface RealtimeRequestJob {
  /** Server-side correlation id (not the client's request_id). */
  requestId: string;
  /** Realtime instance holding the socket; the reply is published on PubSub.rpcReply(instanceId). */
  instanceId: string;
  principal: {
    kind: 'user' | 'apiKey' | 'system';
    userId: string | null;
    apiKeyId: string | null;
    sessionId: string | null;
  };
  /** X-Source-Service of the connection, if it declared one. */
  sourceService: string | null;
  /** The request's WsEnvelope, base64. */
  envelope: string;
}

/** An anonymous password reset request: the address asked for and who asked (for the audit event and the mail's locale). */
export interface PasswordResetJob {
  email: string;
  ipAddress: string | null;
  userAgent: string | null;
  acceptLanguage: string | null;
  /**
   * Asked for while Redis could not answer, so the address's mail slot was not claimed: the job
   * claims it and mails nothing when it is taken (resets asked for during an outage send one mail).
   */
  claimSlot?: boolean;
}

/** A personal data export (GET /v1/user/export): whose, and when it was asked for. */
export interface DataExportJob {
  userId: string;
  requestedAt: string;
}

/** What a finished export job returns: where the ZIP waits in Redis and what the export log records. */
export interface DataExportResult {
  /** Id for RedisKeys.exportArchive(): the archive's bytes, deleted once downloaded. */
  archiveId: string;
  fileSizeBytes: number;
  locale: string;
  exportedAt: string;
}

export interface JobPayloads {
  /** Sends one row of email_outbox. */
  email: { outboxId: string };
  scheduled: { task: ScheduledTask };
  /** Evaluates geofences for freshly inserted GPS points (coalesced per api process every few ms). */
  geofence: { gpsPointIds: string[] };
  /** A protobuf request a service client sent over /v1/ws (audit 100, chat settings 120); the reply goes to PubSub.rpcReply(instanceId). */
  realtimeRequests: RealtimeRequestJob;
  /**
   * A password reset request, handled off the request path so the answer takes the same time for
   * known and unknown addresses. It carries the address because that is the request itself: no row exists yet.
   */
  passwordResets: PasswordResetJob;
  /**
   * Builds one user's data export ZIP (data.json, report.pdf, README.txt) and parks it in Redis.
   * Deduplicated per user (`deduplication.id`), so parallel requests wait for the same job.
   */
  dataExport: DataExportJob;
}
export type JobOf<N extends QueueName> = JobPayloads[N];

/**
 * Default options per queue: retries with exponential backoff, and failed jobs kept (removeOnFail
 * keeps the newest N) for inspection in the dashboard at /v1/admin/queues.
 */
export const queueDefaults: Record<QueueName, JobsOptions> = {
  // Retried until delivered or the row's deliver_until (the processor decides, then fails the job
  // as unrecoverable): the attempt count only has to outlast that at EMAIL_RETRY_MAX_DELAY_MS apart.
  // The backoff is the email worker's own (emailRetryDelay: doubling, capped).
  email: {
    attempts: 1_000_000,
    backoff: { type: 'emailRetry' },
    removeOnComplete: 1000,
    removeOnFail: 5000,
  },
  scheduled: { attempts: 3, backoff: { type: 'exponential', delay: 10000 }, removeOnComplete: 100, removeOnFail: 500 },
  // An outage is waited out (waitsOutOutages): the 3 attempts are for other failures.
  geofence: { attempts: 3, backoff: { type: 'exponential', delay: 1000 }, removeOnComplete: true, removeOnFail: 1000 },
  // One attempt: the requester waits at most 30 s, and a replayed audit write would duplicate it.
  realtimeRequests: { attempts: 1, removeOnComplete: true, removeOnFail: 1000 },
  // Done jobs are dropped at once: they hold an address that may have no account. Its outbox row is
  // gone once it is queued, so an outage is waited out (waitsOutOutages): the 5 attempts are for
  // other failures.
  passwordResets: {
    attempts: 5,
    backoff: { type: 'exponential', delay: 2000 },
    removeOnComplete: true,
    removeOnFail: 1000,
  },
  // Retried (a crashed browser is restarted for the next attempt); finished jobs stay a few minutes so a
  // request joining just as the job ends still reads its result.
  dataExport: {
    attempts: 3,
    backoff: { type: 'exponential', delay: 200 },
    removeOnComplete: { age: 300, count: 1000 },
    removeOnFail: { age: 3600, count: 1000 },
  },
};

/**
 * Queues whose jobs must not be lost to an outage: a job of theirs that fails because a dependency
 * is away (the database unreachable or not answering, Redis down: workers/outageRetry.ts) is tried
 * again after a capped backoff for as long as the outage lasts, without using up its `attempts`;
 * only other failures count against them. The others keep their plain attempts: `scheduled` runs
 * again at its next occurrence, `realtimeRequests` and `dataExport` have a requester waiting for a
 * bounded time, and `email` retries until its row's deadline on its own.
 */
export const waitsOutOutages: ReadonlySet<QueueName> = new Set<QueueName>([
  QueueName.geofence,
  QueueName.passwordResets,
]);

/**
 * The job id of an email_outbox row's `email` job: one job per row, so the relay's at-least-once
 * enqueue and the requeue sweep never make two.
 */
export function emailJobId(outboxId: string): string {
  return `email-${outboxId}`;
}

/** Repeatable maintenance jobs: task name → every N milliseconds. */
export const schedules: Record<ScheduledTask, number> = {
  cleanupSessions: 60 * 60 * 1000,
  expireBans: 60 * 1000,
  purgeDeletedAccounts: 15 * 60 * 1000,
  cleanupAccountTokens: 6 * 60 * 60 * 1000,
  cleanupTwoFactorSetups: 60 * 60 * 1000,
  cleanupOAuth: 60 * 60 * 1000,
  cleanupAttemptCounters: 15 * 60 * 1000,
  compactRowCounters: 60 * 60 * 1000,
  purgeGpsPoints: 60 * 60 * 1000,
  purgeAuditEvents: 60 * 60 * 1000,
  refreshIntegrationTokens: 5 * 60 * 1000,
  // A tick: the task itself follows the chat bot settings (auto_sync_enabled, intervals).
  chatAutoSync: 15 * 1000,
  // Mails still queued whose job is gone (Redis lost it, or an older job ran out of attempts).
  requeueEmails: 60 * 1000,
  purgeSentEmails: 60 * 60 * 1000,
};

/** The BullMQ prefix for this deployment, so tests (and tenants) never share queues. */
export function bullPrefix(config: Pick<Config, 'redisPrefix'>): string {
  return redisKey(config, RedisKeys.bull);
}

/**
 * Producer side of the registry: lazily opened queues with typed enqueue(). The connection is the
 * process's fail-fast one (BullMQ needs maxRetriesPerRequest: null only on blocking connections:
 * workers and QueueEvents), so an enqueue with Redis down fails at once instead of waiting.
 */
export class Queues {
  private readonly queues = new Map<QueueName, Queue>();
  private readonly events = new Map<QueueName, QueueEvents>();
  private readonly closeHooks: Array<() => Promise<void>> = [];
  /** The waits of enqueueAndWait in progress (each one's stop), ended by close(). */
  private readonly waits = new Set<() => void>();
  private readonly eventConnections: Redis[] = [];

  /**
   * `errors`: the process's log of Redis errors. Every queue, queue-events reader and connection
   * opened here reports to it: BullMQ prints an error of an emitter without a listener as plain
   * multi-line text on stderr, twice a second for as long as Redis is down.
   * `waitsEnd`: once aborted, enqueueAndWait stops waiting (ServiceContext.endWaits).
   */
  constructor(
    private readonly connection: Redis,
    private readonly config: Pick<Config, 'redisPrefix'>,
    private readonly errors?: Pick<RedisErrorLog, 'listener' | 'watch'>,
    private readonly waitsEnd?: AbortSignal,
  ) {}

  queue(name: QueueName): Queue {
    let q = this.queues.get(name);
    if (!q) {
      q = new Queue(name, { connection: this.connection, prefix: bullPrefix(this.config) });
      q.on('error', this.errors?.listener(`queue ${name}`) ?? (() => undefined));
      this.queues.set(name, q);
    }
    return q;
  }

  /** Enqueues one job with the queue's default options (overridable per call, e.g. jobId for dedup). */
  async enqueue<N extends QueueName>(name: N, data: JobOf<N>, opts: JobsOptions = {}): Promise<string> {
    const job = await this.queue(name).add(name, data, { ...queueDefaults[name], ...opts });
    return job.id as string;
  }

  /**
   * Enqueues and waits for the result: for requests that need a heavy result (the data export).
   * Rejects after `timeoutMs` with an Error whose name is 'TimeoutError', and with such an Error as
   * soon as the process ends its waits (`waitsEnd`: the api's drain, shortly before its deadline),
   * so that the request answers what its timeout answers instead of being cut. Either way the job
   * stays queued and runs on (a deduplicated retry joins it).
   */
  async enqueueAndWait<N extends QueueName, R = unknown>(
    name: N,
    data: JobOf<N>,
    timeoutMs: number,
    opts: JobsOptions = {},
  ): Promise<R> {
    let ev = this.events.get(name);
    if (!ev) {
      // A blocking reader: it must not inherit the producer connection's fail-fast options.
      const connection = this.connection.duplicate(WAIT_FOR_REDIS);
      if (this.errors) this.errors.watch(connection, `queue events ${name}`);
      else connection.on('error', () => undefined);
      // QueueEvents treats a passed-in instance as shared and never closes it: close() does.
      this.eventConnections.push(connection);
      ev = new QueueEvents(name, { connection, prefix: bullPrefix(this.config) });
      ev.on('error', this.errors?.listener(`queue events ${name}`) ?? (() => undefined));
      this.events.set(name, ev);
      await ev.waitUntilReady();
    }
    const job = await this.queue(name).add(name, data, { ...queueDefaults[name], ...opts });
    // Without BullMQ's ttl: its timer is cleared only by the job's end or a 'closing' event that
    // BullMQ 5 never emits, so a wait cut short by a drain kept a closed api's process alive for
    // the rest of the timeout (60 s for an export). The wait's own timer ends with the wait.
    return this.untilDone(job.waitUntilFinished(ev) as Promise<R>, name, timeoutMs);
  }

  /**
   * `finished`, or a TimeoutError after `timeoutMs`, once `waitsEnd` is aborted (at once if it
   * already is) or once the queues close. Whichever comes first ends the others: no timer or
   * listener outlives the wait. The job's own wait (BullMQ's listeners) ends when the queue events
   * close.
   */
  private untilDone<R>(finished: Promise<R>, name: QueueName, timeoutMs: number): Promise<R> {
    const signal = this.waitsEnd;
    return new Promise<R>((resolve, reject) => {
      const end = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', stop);
        this.waits.delete(stop);
      };
      const fail = (message: string) => {
        end();
        finished.catch(() => undefined);
        const err = new Error(message);
        err.name = 'TimeoutError';
        reject(err);
      };
      const stop = () => fail(`stopped waiting for the ${name} job: the process is shutting down`);
      const timer = setTimeout(() => fail(`the ${name} job did not finish within ${timeoutMs} ms`), timeoutMs);
      if (signal?.aborted) return stop();
      signal?.addEventListener('abort', stop, { once: true });
      this.waits.add(stop);
      finished.then(
        (result) => {
          end();
          resolve(result);
        },
        (err: unknown) => {
          end();
          reject(err);
        },
      );
    });
  }

  /** Registers work to finish before the queues close (e.g. producers that batch enqueues). */
  beforeClose(hook: () => Promise<void>): void {
    this.closeHooks.push(hook);
  }

  async close(): Promise<void> {
    await Promise.all(this.closeHooks.splice(0).map((h) => h().catch(() => undefined)));
    for (const stop of [...this.waits]) stop();
    await Promise.all(
      [...this.events.values()].map(async (e) => {
        const client = await e.client;
        await e.close();
        client.disconnect();
      }),
    );
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    for (const c of this.eventConnections.splice(0)) c.disconnect();
  }
}
