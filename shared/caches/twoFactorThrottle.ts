import type Redis from 'ioredis';
import type { Knex } from 'knex';
import type { Config } from '../config';
import { redisKey, RedisKeys } from '../redis';

/**
 * Lock-out of wrong 2FA codes (ASVS 5.0 §6.5). Every code check on any 2FA endpoint and at
 * POST /v1/auth/2fa/check reserves an attempt first, atomically in PostgreSQL: at most
 * TWO_FACTOR_THROTTLE.maxFailures checks run between cool-downs however many guesses arrive in
 * parallel (the race of GHSA-7h8m-vrxx-vr4m). A check that ends without judging the code (the
 * state changed meanwhile: 2FA already enabled, say) gives its attempt back. A right code clears the
 * count, the level and a lock set meanwhile by checks that ran beside it. Once the count is reached,
 * the user's checks answer 429 for a cool-down that doubles with each lock-out (up to
 * maxCooldownSeconds) until a right code or a quiet day resets it.
 */
export const TWO_FACTOR_THROTTLE = {
  maxFailures: 5,
  /** How long wrong codes keep counting towards a lock-out. */
  windowSeconds: 15 * 60,
  baseCooldownSeconds: 60,
  maxCooldownSeconds: 60 * 60,
  /** How long the lock-out level is remembered. */
  levelSeconds: 24 * 60 * 60,
};

export interface TwoFactorReservation {
  userId: string;
  /** 0: counted, the code may be checked; otherwise seconds to wait (nothing counted). */
  retryAfterSeconds: number;
}

type Cfg = Pick<Config, 'redisPrefix'>;

/** How long a single-use claim waits for Redis before it decides without it (a dead Redis never stalls a request). */
const REDIS_TIMEOUT_MS = 500;
function within<T>(p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => setImmediate(() => reject(new Error('redis did not answer in time'))), REDIS_TIMEOUT_MS);
    timer.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** The user's row in `attempt_counters`. */
const counterKey = (userId: string) => `2fa:${userId}`;

/**
 * Counts one code check for the user before it runs; refuses (retryAfterSeconds > 0) during a
 * cool-down. One statement (`reserve_two_factor_attempt`, migration 20261211000000_attempt_counters)
 * locks the user's row, so concurrent guesses on any instance get at most maxFailures checks; the
 * count lives in PostgreSQL, so a Redis outage neither lifts a lock-out nor resets the count.
 */
export async function reserveTwoFactorAttempt(db: Knex, userId: string): Promise<TwoFactorReservation> {
  const t = TWO_FACTOR_THROTTLE;
  const { rows } = await db.raw<{ rows: Array<{ wait: string }> }>(
    'SELECT reserve_two_factor_attempt(?, ?, ?, ?, ?, ?) AS wait',
    [
      counterKey(userId),
      t.maxFailures,
      t.windowSeconds * 1000,
      t.baseCooldownSeconds * 1000,
      t.maxCooldownSeconds * 1000,
      t.levelSeconds * 1000,
    ],
  );
  const ms = Number(rows[0].wait);
  return { userId, retryAfterSeconds: ms > 0 ? Math.ceil(ms / 1000) : 0 };
}

/**
 * A right code: the failures in a row and the lock-out level start over, and a lock that checks
 * running beside it set meanwhile (parallel requests with the same right code) is lifted.
 */
export async function clearTwoFactorFailures(db: Knex, r: TwoFactorReservation): Promise<void> {
  // Best effort: the code was right; a failure here must not fail the check.
  await db.raw('DELETE FROM attempt_counters WHERE key = ?', [counterKey(r.userId)]).catch(() => undefined);
}

/** A check that ended without judging the code (a state error, a failure): its attempt does not count. */
export async function giveBackTwoFactorAttempt(db: Knex, r: TwoFactorReservation): Promise<void> {
  await db
    .raw(
      'UPDATE attempt_counters SET count = count - 1 WHERE key = ? AND count > 0 AND expires_at > clock_timestamp()',
      [counterKey(r.userId)],
    )
    .catch(() => undefined);
}

/**
 * Claims a TOTP time step for a user's secret (`subject`): true the first time on any instance, false for a replay.
 * Without Redis the database's last accepted step (checked under the row lock) still refuses it.
 */
export async function claimTotpStep(redis: Redis, config: Cfg, subject: string, step: number): Promise<boolean> {
  try {
    const ok = await within(
      redis.set(redisKey(config, RedisKeys.twoFactorUsedStep(subject, step)), '1', 'EX', 180, 'NX'),
    );
    return ok === 'OK';
  } catch {
    return true;
  }
}

/** Claims a finished sign-in challenge (single use); true without Redis (the code itself is single use). */
export async function claimChallenge(
  redis: Redis,
  config: Cfg,
  tokenHash: string,
  ttlSeconds: number,
): Promise<boolean> {
  try {
    const ok = await within(
      redis.set(redisKey(config, RedisKeys.twoFactorChallengeUsed(tokenHash)), '1', 'EX', ttlSeconds, 'NX'),
    );
    return ok === 'OK';
  } catch {
    return true;
  }
}

/**
 * Whether a sign-in challenge was already spent, asked before its code is checked so a spent
 * challenge never spends a code (nor counts a check); false without Redis.
 */
export async function challengeSpent(redis: Redis, config: Cfg, tokenHash: string): Promise<boolean> {
  try {
    return (await within(redis.exists(redisKey(config, RedisKeys.twoFactorChallengeUsed(tokenHash))))) === 1;
  } catch {
    return false;
  }
}
