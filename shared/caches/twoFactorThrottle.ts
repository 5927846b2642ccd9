import type Redis from 'ioredis';
import type { Config } from '../config';
import { redisKey, RedisKeys } from '../redis';

/**
 * Lock-out of wrong 2FA codes (ASVS 5.0 §6.5). Every code check on any 2FA endpoint and at
 * POST /v1/auth/2fa/check reserves an attempt first, atomically in Redis: at most
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

/*
 * KEYS: fails, lock, level. ARGV: max, window ms, base cooldown ms, max cooldown ms, level ttl ms.
 * Returns 0 when the attempt was counted (the check may run), else the ms to wait. Reaching the
 * maximum sets the lock (its TTL grows with the level) and clears the count for the next round.
 */
const RESERVE = `
local lock = redis.call('PTTL', KEYS[2])
if lock > 0 then return lock end
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
if c >= tonumber(ARGV[1]) then
  local level = redis.call('INCR', KEYS[3])
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
  local ms = tonumber(ARGV[3]) * (2 ^ (level - 1))
  if ms > tonumber(ARGV[4]) then ms = tonumber(ARGV[4]) end
  redis.call('SET', KEYS[2], '1', 'PX', math.floor(ms))
  redis.call('DEL', KEYS[1])
  return math.floor(ms)
end
redis.call('INCR', KEYS[1])
if c == 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;

/* KEYS: fails. Takes back one counted attempt (never below zero: a lock-out may have cleared the count). */
const GIVE_BACK = `
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
if c > 0 then redis.call('DECR', KEYS[1]) end
return 0`;

type ThrottleRedis = Redis & {
  twoFactorReserve(n: number, ...args: Array<string | number>): Promise<number>;
  twoFactorGiveBack(n: number, key: string): Promise<number>;
};
const prepared = new WeakSet<Redis>();
function scripts(redis: Redis): ThrottleRedis {
  if (!prepared.has(redis)) {
    redis.defineCommand('twoFactorReserve', { lua: RESERVE });
    redis.defineCommand('twoFactorGiveBack', { lua: GIVE_BACK });
    prepared.add(redis);
  }
  return redis as ThrottleRedis;
}

const REDIS_TIMEOUT_MS = 500;
function within<T>(p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => setImmediate(() => reject(new Error('redis did not answer in time'))), REDIS_TIMEOUT_MS);
    timer.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/*
 * While Redis does not answer: the same rule per process (checked and counted in one synchronous
 * step), so guessing stays bounded by the limit times the number of api processes.
 */
const local = new Map<string, { fails: number; lockedUntil: number; level: number; resetAt: number }>();
const LOCAL_MAX = 10_000;

function reserveLocal(userId: string): number {
  const now = Date.now();
  let e = local.get(userId);
  if (e && e.resetAt <= now) {
    local.delete(userId);
    e = undefined;
  }
  if (!e) {
    if (local.size >= LOCAL_MAX) local.delete(local.keys().next().value!);
    e = { fails: 0, lockedUntil: 0, level: 0, resetAt: now + TWO_FACTOR_THROTTLE.levelSeconds * 1000 };
    local.set(userId, e);
  }
  if (e.lockedUntil > now) return e.lockedUntil - now;
  if (e.fails >= TWO_FACTOR_THROTTLE.maxFailures) {
    e.level++;
    const ms = Math.min(
      TWO_FACTOR_THROTTLE.baseCooldownSeconds * 1000 * 2 ** (e.level - 1),
      TWO_FACTOR_THROTTLE.maxCooldownSeconds * 1000,
    );
    e.lockedUntil = now + ms;
    e.fails = 0;
    return ms;
  }
  e.fails++;
  return 0;
}

export interface TwoFactorReservation {
  userId: string;
  /** 0: counted, the code may be checked; otherwise seconds to wait (nothing counted). */
  retryAfterSeconds: number;
  store: 'redis' | 'local';
}

type Cfg = Pick<Config, 'redisPrefix'>;
const keys = (c: Cfg, userId: string) => [
  redisKey(c, RedisKeys.twoFactorFails(userId)),
  redisKey(c, RedisKeys.twoFactorLock(userId)),
  redisKey(c, RedisKeys.twoFactorLockLevel(userId)),
];

/** Counts one code check for the user before it runs; refuses (retryAfterSeconds > 0) during a cool-down. */
export async function reserveTwoFactorAttempt(
  redis: Redis,
  config: Cfg,
  userId: string,
): Promise<TwoFactorReservation> {
  const t = TWO_FACTOR_THROTTLE;
  let store: TwoFactorReservation['store'] = 'redis';
  let ms: number;
  try {
    ms = Number(
      await within(
        scripts(redis).twoFactorReserve(
          3,
          ...keys(config, userId),
          t.maxFailures,
          t.windowSeconds * 1000,
          t.baseCooldownSeconds * 1000,
          t.maxCooldownSeconds * 1000,
          t.levelSeconds * 1000,
        ),
      ),
    );
  } catch {
    store = 'local';
    ms = reserveLocal(userId);
  }
  return { userId, retryAfterSeconds: ms > 0 ? Math.ceil(ms / 1000) : 0, store };
}

/**
 * A right code: the failures in a row and the lock-out level start over, and a lock that checks
 * running beside it set meanwhile (parallel requests with the same right code) is lifted.
 */
export async function clearTwoFactorFailures(redis: Redis, config: Cfg, r: TwoFactorReservation): Promise<void> {
  local.delete(r.userId);
  if (r.store === 'redis') await within(redis.del(...keys(config, r.userId))).catch(() => undefined);
}

/** A check that ended without judging the code (a state error, a failure): its attempt does not count. */
export async function giveBackTwoFactorAttempt(redis: Redis, config: Cfg, r: TwoFactorReservation): Promise<void> {
  if (r.store === 'local') {
    const e = local.get(r.userId);
    if (e && e.fails > 0) e.fails--;
    return;
  }
  await within(scripts(redis).twoFactorGiveBack(1, keys(config, r.userId)[0])).catch(() => undefined);
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
