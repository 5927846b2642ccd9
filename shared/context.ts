import type { Knex } from 'knex';
import type Redis from 'ioredis';
import type { Config } from './config';
import { createDb } from './db';
import { EventBus } from './events';
import { createLogger, Logger } from './logger';
import { Queues } from './queues';
import { createRedis, FAIL_FAST } from './redis';

/**
 * What every process holds: config, logger, database, Redis, the typed event bus and the queue
 * producers. Built once per process (or once per test), passed down explicitly.
 */
export interface ServiceContext {
  config: Config;
  logger: Logger;
  db: Knex;
  redis: Redis;
  bus: EventBus;
  queues: Queues;
  close(): Promise<void>;
}

/** Builds the context; its Redis connection is fail-fast (see FAIL_FAST), so await `redisReady()` before using it at start. */
export function createContext(config: Config, name: string, logger?: Logger): ServiceContext {
  const log = logger ?? createLogger(name, config.logLevel);
  const db = createDb(config);
  // Fail fast: with Redis down a request falls back or gives up at once, never waits.
  const redis = createRedis(config, FAIL_FAST);
  redis.on('error', (err) => log.warn({ err: err.message }, 'redis connection error'));
  const bus = new EventBus(redis, config);
  const queues = new Queues(redis, config);
  return {
    config,
    logger: log,
    db,
    redis,
    bus,
    queues,
    async close() {
      await queues.close().catch(() => undefined);
      bus.close();
      // QUIT lets commands already queued (publishes after a commit) finish; a dead Redis gets 1 s.
      await Promise.race([redis.quit().catch(() => undefined), new Promise((r) => setTimeout(r, 1000).unref())]);
      redis.disconnect();
      await db.destroy();
    },
  };
}
