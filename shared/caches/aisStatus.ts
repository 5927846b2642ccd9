import type Redis from 'ioredis';
import type { Config } from '../config';
import { redisKey, RedisKeys } from '../redis';

/** vesselsUpdate is pushed at most this often, with only the vessels that changed in between. */
export const AIS_FLUSH_MS = 1000;

export interface AisHealth {
  connected: boolean;
  sentences: number;
  errors: number;
  vessels: number;
}

/** The AIS part of /health: counters of the current (or last) consumer; `connected` only while it reports. */
export async function aisStatus(redis: Redis, config: Pick<Config, 'redisPrefix' | 'aisLeaseMs'>): Promise<AisHealth> {
  const s = await redis.hgetall(redisKey(config, RedisKeys.aisStatus));
  const fresh = Date.now() - Number(s.at ?? 0) < Math.max(3 * AIS_FLUSH_MS, config.aisLeaseMs);
  return {
    connected: fresh && s.connected === '1',
    sentences: Number(s.sentences ?? 0),
    errors: Number(s.errors ?? 0),
    vessels: fresh ? Number(s.vessels ?? 0) : 0,
  };
}
