import type Redis from 'ioredis';
import type { Config } from '../config';
import { sha256 } from '../crypto';
import { redisKey } from '../redis';

/**
 * Failed sign-in cool-down (decisions.md): failures are counted per account and per IP in Redis;
 * once a counter reaches its maximum within the window, further attempts answer 429 with
 * Retry-After until the window ends. Failed 2FA codes count through the same functions.
 */
export const LOGIN_THROTTLE = {
  account: { max: 5, windowSeconds: 15 * 60 },
  ip: { max: 20, windowSeconds: 15 * 60 },
};

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
const accountKey = (c: Cfg, subject: string) => redisKey(c, 'loginfail', 'acct', subject);
const ipKey = (c: Cfg, ip: string) => redisKey(c, 'loginfail', 'ip', ip);

/** Seconds the caller must wait, or 0 when sign-in may be attempted. Fail-open when Redis is down. */
export async function loginCooldownSeconds(redis: Redis, config: Cfg, who: Who): Promise<number> {
  try {
    const ipK = ipKey(config, who.ip ?? 'none');
    const [[, acct], [, acctTtl], [, ip], [, ipTtl]] = (await redis
      .multi()
      .get(accountKey(config, who.subject))
      .pttl(accountKey(config, who.subject))
      .get(ipK)
      .pttl(ipK)
      .exec()) as Array<[Error | null, unknown]>;
    let wait = 0;
    if (Number(acct) >= LOGIN_THROTTLE.account.max) wait = Math.max(wait, Number(acctTtl));
    if (who.ip && Number(ip) >= LOGIN_THROTTLE.ip.max) wait = Math.max(wait, Number(ipTtl));
    return wait > 0 ? Math.ceil(wait / 1000) : 0;
  } catch {
    return 0;
  }
}

/** Counts one failed attempt against the account and the IP (each window starts at its first failure). */
export async function recordLoginFailure(redis: Redis, config: Cfg, who: Who): Promise<void> {
  try {
    // SET NX starts the window once (Redis 6.2 has no EXPIRE NX), INCR counts within it.
    const m = redis
      .multi()
      .set(accountKey(config, who.subject), 0, 'EX', LOGIN_THROTTLE.account.windowSeconds, 'NX')
      .incr(accountKey(config, who.subject));
    if (who.ip) m.set(ipKey(config, who.ip), 0, 'EX', LOGIN_THROTTLE.ip.windowSeconds, 'NX').incr(ipKey(config, who.ip));
    await m.exec();
  } catch {
    /* fail-open: a Redis outage must not block sign-in */
  }
}

/** A successful sign-in (or a password reset) clears the account's counter; the IP's stays. */
export async function clearLoginFailures(redis: Redis, config: Cfg, subject: string): Promise<void> {
  await redis.del(accountKey(config, subject)).catch(() => undefined);
}
