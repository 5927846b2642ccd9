import type Redis from 'ioredis';
import type { Knex } from 'knex';
import { clock } from '../clock';
import type { Config } from '../config';
import { readPublicStats, PublicStats } from '../queries/publicStats';
import { redisKey, RedisKeys } from '../redis';

/** decisions.md: the public statistics are cached for a minute. */
export const PUBLIC_STATS_TTL_SECONDS = 60;

interface Memo {
  at: number;
  value: Promise<PublicStats>;
}
const memos = new WeakMap<Knex, Memo>();

/**
 * The public statistics, shared by all instances through Redis for a minute; concurrent misses in
 * one process share one computation (readPublicStats, which never scans gps_points in full). With
 * Redis unreachable each process keeps its own one-minute copy.
 */
export async function publicStats(db: Knex, redis: Redis, config: Pick<Config, 'redisPrefix'>): Promise<PublicStats> {
  const key = redisKey(config, RedisKeys.publicStats);
  const cached = await redis.get(key).catch(() => undefined);
  if (cached) return JSON.parse(cached) as PublicStats;
  const now = clock.now();
  const memo = memos.get(db);
  // Within the minute a process reuses its own figures (Redis down, or another miss in flight).
  if (memo && now - memo.at < PUBLIC_STATS_TTL_SECONDS * 1000) return memo.value;
  const value = readPublicStats(db);
  memos.set(db, { at: now, value });
  value.then(
    (stats) => redis.set(key, JSON.stringify(stats), 'EX', PUBLIC_STATS_TTL_SECONDS).catch(() => undefined),
    () => memos.delete(db),
  );
  return value;
}
