import Redis, { RedisOptions } from 'ioredis';
import type { Config } from './config';

/**
 * Redis connections. Keys are prefixed explicitly with `redisKey()` rather than ioredis' keyPrefix,
 * because BullMQ refuses keyPrefix and pub/sub channels ignore it: one prefix rule for all three.
 */
export function createRedis(config: Config, opts: RedisOptions = {}): Redis {
  return new Redis(config.redisUrl, {
    lazyConnect: false,
    maxRetriesPerRequest: null,
    ...opts,
  });
}

/** `prefix + parts.join(':')`: the only way a Redis key or channel name is built. */
export function redisKey(config: Pick<Config, 'redisPrefix'>, ...parts: Array<string | number>): string {
  return config.redisPrefix + parts.join(':');
}
