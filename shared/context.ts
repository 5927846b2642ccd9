import type { Knex } from 'knex';
import type Redis from 'ioredis';
import { AuditBuffer } from './auditBuffer';
import type { Config } from './config';
import { createDb, databaseOutageLog, onAfterCommitFailure } from './db';
import { EventBus } from './events';
import { createLogger, Logger } from './logger';
import type { OutageLog } from './outageLog';
import { OutboxRelay } from './outbox';
import { ChatBotClient } from './proto/rpc';
import { configurePasswordHashing } from './domain/passwords';
import { Queues } from './queues';
import { createRedis, FAIL_FAST, isRedisUnavailable, RedisErrorLog } from './redis';
import { ReleaseDeadline } from './shutdown';

/**
 * What every process holds: config, logger, database, Redis, the typed event bus, the queue
 * producers and the side-effect relay. Built once per process (or once per test), passed down
 * explicitly. The entry point starts the relay (`outbox.start()`) once the process is ready.
 */
export interface ServiceContext {
  config: Config;
  logger: Logger;
  db: Knex;
  redis: Redis;
  /** The process's one log of Redis connection errors: watch every further connection with it. */
  redisErrors: RedisErrorLog;
  /**
   * The process's one log of database outages (shared/outageLog.ts): report a failure to reach the
   * database there (`isDatabaseUnavailable` in shared/errors.ts), not one line per occurrence.
   */
  dbOutages: OutageLog;
  bus: EventBus;
  queues: Queues;
  outbox: OutboxRelay;
  /** Buffered writer of audit events outside a request's transaction (shared/auditBuffer.ts). */
  audit: AuditBuffer;
  /** Requests to the connected chat bot (chat sync); opens its reply subscription on first use. */
  chatBot: ChatBotClient;
  /**
   * Ends every wait of a request on work done elsewhere (`queues.enqueueAndWait`, `chatBot.call`):
   * each one gives up at once, as its timeout would, and so do the waits that start afterwards; the
   * work itself goes on (a queued job still runs). The api's drain calls it shortly before its
   * deadline, so that such a request is answered rather than cut (api/drain.ts).
   */
  endWaits(): void;
  /** Releases everything, within `release`'s deadline (a new one unless the caller's steps share it). */
  close(release?: ReleaseDeadline): Promise<void>;
}

/** Builds the context; its Redis connection is fail-fast (see FAIL_FAST), so await `redisReady()` before using it at start. */
export function createContext(config: Config, name: string, logger?: Logger): ServiceContext {
  const log = logger ?? createLogger(name, config.logLevel);
  configurePasswordHashing(config.passwordHashing);
  const dbOutages = databaseOutageLog(log);
  const db = createDb(config, { serving: name === 'api', logger: log, outages: dbOutages, name });
  // Fail fast: with Redis down a request falls back or leaves the work to the outbox, never waits.
  const redis = createRedis(config, FAIL_FAST);
  const redisErrors = new RedisErrorLog(log);
  redisErrors.watch(redis, 'requests');
  // A push after a commit that Redis refused is part of the Redis outage (folded, one line in ten
  // seconds): one error with a stack per request was 85 lines in a minute's outage.
  const afterCommitRedis = redisErrors.listener('after-commit side effects');
  onAfterCommitFailure((err) =>
    isRedisUnavailable(err) ? afterCommitRedis(err as Error) : log.error({ err }, 'after-commit side effect failed'),
  );
  const bus = new EventBus(redis, config);
  const waits = new AbortController();
  const queues = new Queues(redis, config, redisErrors, waits.signal);
  const outbox = new OutboxRelay({ db, redis, bus, queues, config, logger: log });
  const audit = new AuditBuffer({ db, logger: log });
  const chatBot = new ChatBotClient(redis, config, waits.signal);
  return {
    config,
    logger: log,
    db,
    redis,
    redisErrors,
    dbOutages,
    bus,
    queues,
    outbox,
    audit,
    chatBot,
    endWaits: () => waits.abort(),
    async close(release = new ReleaseDeadline(log)) {
      // One deadline for all of it: a hung PostgreSQL or Redis must not keep the process alive.
      // Buffered audit events first: their live-feed rows join the relay's last drain.
      await release.step('audit events', () => audit.close());
      // The relay's last drain still needs the queues and the connection.
      await release.step('outbox relay', () => outbox.close());
      await release.step('queues', () => queues.close());
      await release.step('chat bot client', () => chatBot.close());
      bus.close();
      // QUIT lets commands already queued (publishes after a commit) finish.
      await release.step('redis', () => redis.quit());
      redis.disconnect();
      await release.step('database pool', () => db.destroy());
    },
  };
}
