import type Redis from 'ioredis';
import type { Config } from '../config';
import { sha256 } from '../crypto';
import { redisKey, RedisKeys } from '../redis';

/** At most `max` attempts in a window of `windowSeconds` that starts at the first attempt counted. */
export interface AttemptLimit {
  max: number;
  windowSeconds: number;
}

/**
 * Failed sign-in cool-down (decisions.md): failures are counted per account and per IP in Redis;
 * once a counter reaches its maximum within the window, further attempts answer 429 with
 * Retry-After until the window ends. Failed 2FA codes count through the same functions.
 */
export const LOGIN_THROTTLE: { account: AttemptLimit; ip: AttemptLimit } = {
  account: { max: 5, windowSeconds: 15 * 60 },
  ip: { max: 20, windowSeconds: 15 * 60 },
};

/** One counter an attempt is reserved on: its full Redis key (built with `redisKey`) and its limit. */
export interface AttemptCounter {
  key: string;
  limit: AttemptLimit;
}

/** What `reserveAttempt` answers. */
export interface Reservation {
  /** 0 when the attempt was counted on every counter and may be checked; otherwise the seconds to wait (nothing was counted). */
  retryAfterSeconds: number;
  /** The counters the attempt was counted on (empty when refused): what `releaseAttempt` gives back. */
  counters: AttemptCounter[];
  /** Where it was counted: Redis, or this process's fallback counters when Redis did not answer in time. */
  store: 'redis' | 'local';
}

/** How long a throttle call waits for Redis before it counts in this process instead (a dead Redis never stalls a request). */
const REDIS_TIMEOUT_MS = 500;

/*
 * KEYS: the counters; ARGV[i]: max of KEYS[i]; ARGV[n + i]: window (ms) of KEYS[i].
 * Check every counter, then count on every one, in one atomic step: concurrent attempts cannot all
 * read "below the maximum" before any of them is counted. A refused attempt counts nowhere, so an
 * account in cool-down does not also use up its IP's allowance. Returns 0, or the ms to wait.
 */
const RESERVE_SCRIPT = `
local n = #KEYS
local wait = 0
for i = 1, n do
  if tonumber(redis.call('GET', KEYS[i]) or '0') >= tonumber(ARGV[i]) then
    local ttl = redis.call('PTTL', KEYS[i])
    if ttl < 0 then
      redis.call('PEXPIRE', KEYS[i], ARGV[n + i])
      ttl = tonumber(ARGV[n + i])
    end
    if ttl > wait then wait = ttl end
  end
end
if wait > 0 then return wait end
for i = 1, n do
  local c = redis.call('INCR', KEYS[i])
  if c == 1 or redis.call('PTTL', KEYS[i]) < 0 then redis.call('PEXPIRE', KEYS[i], ARGV[n + i]) end
end
return 0`;

/* Gives one attempt back on each counter that still exists (DECR keeps the window's expiry; a counter cleared meanwhile stays cleared). */
const RELEASE_SCRIPT = `
for i, k in ipairs(KEYS) do
  if tonumber(redis.call('GET', k) or '0') > 0 then redis.call('DECR', k) end
end
return 0`;

type ThrottleRedis = Redis & {
  throttleReserve(numKeys: number, ...args: Array<string | number>): Promise<number>;
  throttleRelease(numKeys: number, ...keys: string[]): Promise<number>;
};
const prepared = new WeakSet<Redis>();
function scripts(redis: Redis): ThrottleRedis {
  if (!prepared.has(redis)) {
    redis.defineCommand('throttleReserve', { lua: RESERVE_SCRIPT });
    redis.defineCommand('throttleRelease', { lua: RELEASE_SCRIPT });
    prepared.add(redis);
  }
  return redis as ThrottleRedis;
}

/**
 * Rejects after `ms` (the Redis command itself may still run later: counting it there too is harmless).
 * When the timer fires, pending I/O is read first (setImmediate runs after the poll phase): a busy
 * event loop that ran the timer late must not mistake an answer already waiting in the socket for a dead Redis.
 */
function within<T>(p: Promise<T>, ms = REDIS_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => setImmediate(() => reject(new Error('redis did not answer in time'))), ms);
    timer.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/*
 * Fallback while Redis is down or slow. Failing closed would turn a Redis outage into a sign-in
 * outage; failing open (as before) would turn it into unlimited guessing. The database has no
 * counter to fall back on: the login_failed audit events are written after the password check, so
 * counting them has the very race this module closes, and it would add queries to every sign-in
 * while the system is already degraded. A per-process counter is checked and counted in one
 * synchronous step, so it is atomic within the process: during an outage guessing stays bounded by
 * the same limits times the number of api processes. Its size is capped; the oldest entries go first.
 */
const LOCAL_MAX_KEYS = 10_000;
const local = new Map<string, { count: number; resetAt: number }>();

function liveLocal(key: string, now: number) {
  const e = local.get(key);
  if (e && e.resetAt <= now) local.delete(key);
  return e && e.resetAt > now ? e : undefined;
}

function reserveLocal(counters: AttemptCounter[]): number {
  const now = Date.now();
  let wait = 0;
  for (const c of counters) {
    const e = liveLocal(c.key, now);
    if (e && e.count >= c.limit.max) wait = Math.max(wait, e.resetAt - now);
  }
  if (wait > 0) return wait;
  for (const c of counters) {
    const e = liveLocal(c.key, now);
    if (e) e.count++;
    else {
      if (local.size >= LOCAL_MAX_KEYS) {
        for (const [k, v] of local) if (v.resetAt <= now) local.delete(k);
        while (local.size >= LOCAL_MAX_KEYS) local.delete(local.keys().next().value!);
      }
      local.set(c.key, { count: 1, resetAt: now + c.limit.windowSeconds * 1000 });
    }
  }
  return 0;
}

/**
 * Reserves one attempt on every counter before the credential is checked, atomically: when any
 * counter has reached its maximum nothing is counted and `retryAfterSeconds` says how long to wait.
 * A reserved attempt counts as a failure unless `releaseAttempt` gives it back, so N concurrent
 * guesses get at most `max` checks. Counts in this process when Redis does not answer in time.
 */
export async function reserveAttempt(redis: Redis, counters: AttemptCounter[]): Promise<Reservation> {
  const keys = counters.map((c) => c.key);
  const args = [...counters.map((c) => c.limit.max), ...counters.map((c) => c.limit.windowSeconds * 1000)];
  let store: Reservation['store'] = 'redis';
  let waitMs: number;
  try {
    waitMs = Number(await within(scripts(redis).throttleReserve(keys.length, ...keys, ...args)));
  } catch {
    store = 'local';
    waitMs = reserveLocal(counters);
  }
  return waitMs > 0
    ? { retryAfterSeconds: Math.ceil(waitMs / 1000), counters: [], store }
    : { retryAfterSeconds: 0, counters, store };
}

/** Gives a reserved attempt back because it was not a failure (the right password or code). */
export async function releaseAttempt(redis: Redis, reservation: Reservation): Promise<void> {
  const keys = reservation.counters.map((c) => c.key);
  if (keys.length === 0) return;
  if (reservation.store === 'local') {
    const now = Date.now();
    for (const k of keys) {
      const e = liveLocal(k, now);
      if (e && e.count > 0) e.count--;
    }
    return;
  }
  // Best effort: an attempt that cannot be given back stays counted until its window ends.
  await within(scripts(redis).throttleRelease(keys.length, ...keys)).catch(() => undefined);
}

/** Clears counters altogether (here and in Redis), e.g. an account's failures after a successful sign-in. */
async function resetAttempts(redis: Redis, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  for (const k of keys) local.delete(k);
  await within(redis.del(...keys)).catch(() => undefined);
}

/**
 * The account counter's subject for an address. Unknown addresses are counted like known ones,
 * so the cool-down does not reveal which addresses have accounts.
 */
export function throttleSubjectForEmail(email: string): string {
  return `email:${sha256(email.trim().toLowerCase())}`;
}

type Cfg = Pick<Config, 'redisPrefix'>;

/** The account subject and the client IP (null when the real client address is unknown). */
export interface Who {
  subject: string;
  ip: string | null;
}
const accountKey = (c: Cfg, subject: string) => redisKey(c, RedisKeys.loginFailAccount(subject));
const ipKey = (c: Cfg, ip: string) => redisKey(c, RedisKeys.loginFailIp(ip));

/** The sign-in counters of an attempt: the account's, and the IP's when the client address is known. */
function loginCounters(config: Cfg, who: Who): AttemptCounter[] {
  const counters = [{ key: accountKey(config, who.subject), limit: LOGIN_THROTTLE.account }];
  if (who.ip) counters.push({ key: ipKey(config, who.ip), limit: LOGIN_THROTTLE.ip });
  return counters;
}

/** Reserves a sign-in attempt on the account's and the IP's counters (see `reserveAttempt`). */
export function reserveLoginAttempt(redis: Redis, config: Cfg, who: Who): Promise<Reservation> {
  return reserveAttempt(redis, loginCounters(config, who));
}

/**
 * Reserves a code check on the IP's sign-in counter alone: wrong 2FA codes count per IP like failed
 * passwords (decisions.md), beside the per-account 2FA lock-out. Release it when the code was right.
 */
export function reserveIpAttempt(redis: Redis, config: Cfg, ip: string): Promise<Reservation> {
  return reserveAttempt(redis, [{ key: ipKey(config, ip), limit: LOGIN_THROTTLE.ip }]);
}

/** A successful sign-in (or a password reset) clears the account's counter; the IP's stays. */
export async function clearLoginFailures(redis: Redis, config: Cfg, subject: string): Promise<void> {
  await resetAttempts(redis, [accountKey(config, subject)]);
}
