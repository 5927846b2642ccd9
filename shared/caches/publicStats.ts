import type Redis from 'ioredis';
import type { Knex } from 'knex';
import { clock } from '../clock';
import type { Config } from '../config';
import { readPublicStats, PublicStats } from '../queries/publicStats';
import { redisKey, RedisKeys } from '../redis';

/** decisions.md: the public statistics are cached for a minute. */
export const PUBLIC_STATS_TTL_SECONDS = 60;

interface Memo {
  /** Until when (clock ms) this process answers `value` without asking Redis. */
  until: number;
  value: Promise<PublicStats>;
}
const memos = new WeakMap<Knex, Memo>();

/**
 * The public statistics, shared by all instances through Redis for a minute. A process keeps what
 * it read (or computed) until that Redis entry expires, so a request costs no Redis round trip (a
 * GET per request was a third of the route's CPU: one socket write each) and every instance still
 * answers the same figures for the same minute. Concurrent misses in one process share one read or
 * computation (readPublicStats, which never scans gps_points in full). With Redis unreachable each
 * process keeps its own one-minute copy.
 */
export function publicStats(db: Knex, redis: Redis, config: Pick<Config, 'redisPrefix'>): Promise<PublicStats> {
  const now = clock.now();
  const memo = memos.get(db);
  if (memo && now < memo.until) return memo.value;
  const key = redisKey(config, RedisKeys.publicStats);
  // `value` is set just below; the read adjusts `until` to the entry's remaining time.
  const fresh = { until: now + PUBLIC_STATS_TTL_SECONDS * 1000 } as Memo;
  fresh.value = (async () => {
    const shared = await redis
      .multi()
      .get(key)
      .pttl(key)
      .exec()
      .catch(() => null);
    const text = shared?.[0]?.[1];
    const ttl = shared?.[1]?.[1];
    if (typeof text === 'string' && typeof ttl === 'number' && ttl > 0) {
      // Another instance's figures: kept for as long as they are Redis's.
      fresh.until = now + ttl;
      return JSON.parse(text) as PublicStats;
    }
    const stats = await readPublicStats(db);
    redis.set(key, JSON.stringify(stats), 'EX', PUBLIC_STATS_TTL_SECONDS).catch(() => undefined);
    return stats;
  })();
  memos.set(db, fresh);
  fresh.value.catch(() => {
    if (memos.get(db) === fresh) memos.delete(db);
  });
  return fresh.value;
}
