import type Redis from 'ioredis';
import type { Config } from '../config';
import { redisKey, RedisKeys } from '../redis';

const HOUR_MS = 3600_000;

// Count one export in the user's clock-hour window; the counter expires when the window ends.
// Atomic: two requests never see one count.
const COUNT_SCRIPT = `
local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIREAT', KEYS[1], ARGV[1]) end
return c`;

// One waiting request is done with the archive: the last one deletes it (and the waiter count).
const LEAVE_SCRIPT = `
local n = redis.call('DECR', KEYS[1])
if n <= 0 then
  redis.call('DEL', KEYS[1])
  if KEYS[2] then redis.call('DEL', KEYS[2]) end
end
return n`;

export interface ExportAllowance {
  allowed: boolean;
  limit: number;
  retryAfterSeconds: number;
  /** The counter this request was counted in (null when Redis did not count it). */
  counted: string | null;
}

/**
 * Counts one export request of `userId` in the current hour window (EXPORT_RATE_LIMIT_PER_HOUR)
 * and says whether it is within the limit. With Redis unreachable it lets the request through:
 * the export itself then fails on the queue with a 503.
 */
export async function countExportRequest(redis: Redis, config: Config, userId: string): Promise<ExportAllowance> {
  const limit = config.dataExport.rateLimitPerHour;
  const window = Math.floor(Date.now() / HOUR_MS);
  try {
    const end = (window + 1) * HOUR_MS;
    const count = (await redis.eval(
      COUNT_SCRIPT,
      1,
      redisKey(config, RedisKeys.exportRate(userId, window)),
      end,
    )) as number;
    // The window is the clock hour (UTC): the limit lifts when it ends, whenever its first export was.
    const left = end - Date.now();
    return {
      allowed: count <= limit,
      limit,
      retryAfterSeconds: Math.max(1, Math.ceil(left / 1000)),
      counted: redisKey(config, RedisKeys.exportRate(userId, window)),
    };
  } catch {
    return { allowed: true, limit, retryAfterSeconds: 0, counted: null };
  }
}

/**
 * Gives back the count of an export request that delivered no archive (it failed or timed out):
 * the hourly limit counts exports a user received. Never throws.
 */
export async function giveBackExportRequest(redis: Redis, allowance: ExportAllowance): Promise<void> {
  if (!allowance.counted) return;
  await redis.eval(GIVE_BACK_SCRIPT, 1, allowance.counted).catch(() => undefined);
}

/* KEYS: the window's counter. Decrements it, never below zero (nor a counter that expired meanwhile). */
const GIVE_BACK_SCRIPT = `
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n > 0 then redis.call('DECR', KEYS[1]) end
return 1`;

/** Worker side: parks a finished archive for the waiting requests, expiring after EXPORT_ARCHIVE_TTL_SECONDS. */
export async function storeExportArchive(redis: Redis, config: Config, archiveId: string, zip: Buffer): Promise<void> {
  await redis.set(redisKey(config, RedisKeys.exportArchive(archiveId)), zip, 'EX', config.dataExport.archiveTtlSeconds);
}

/** Api side: a request starts waiting for the user's export (so the archive outlives the first download). */
export async function joinExportWait(redis: Redis, config: Config, userId: string): Promise<void> {
  const key = redisKey(config, RedisKeys.exportWaiters(userId));
  await redis
    .multi()
    .incr(key)
    .expire(key, Math.ceil(config.dataExport.timeoutMs / 1000) + config.dataExport.archiveTtlSeconds)
    .exec();
}

/** The archive's bytes (null when it expired or was never stored). */
export async function readExportArchive(redis: Redis, config: Config, archiveId: string): Promise<Buffer | null> {
  return redis.getBuffer(redisKey(config, RedisKeys.exportArchive(archiveId)));
}

/**
 * A request is done waiting (downloaded, failed or timed out). The last waiter of the user deletes
 * the archive it read; an archive nobody reads expires on its own.
 */
export async function leaveExportWait(
  redis: Redis,
  config: Config,
  userId: string,
  archiveId: string | null,
): Promise<void> {
  const keys = [redisKey(config, RedisKeys.exportWaiters(userId))];
  if (archiveId) keys.push(redisKey(config, RedisKeys.exportArchive(archiveId)));
  await redis.eval(LEAVE_SCRIPT, keys.length, ...keys).catch(() => undefined);
}
