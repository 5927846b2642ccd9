import type { Knex } from 'knex';
import { counterAddress } from '../addressBlock';
import { sha256 } from '../crypto';

/** At most `max` attempts in a window of `windowSeconds` that starts at the first attempt counted. */
export interface AttemptLimit {
  max: number;
  windowSeconds: number;
}

/**
 * Failed sign-in cool-down (decisions.md): failures are counted per account and per IP in PostgreSQL;
 * once a counter reaches its maximum within the window, further attempts answer 429 with
 * Retry-After until the window ends. Failed 2FA codes count through the same functions.
 */
export const LOGIN_THROTTLE: { account: AttemptLimit; ip: AttemptLimit } = {
  account: { max: 5, windowSeconds: 15 * 60 },
  ip: { max: 20, windowSeconds: 15 * 60 },
};

/** One counter an attempt is reserved on: its key in `attempt_counters` and its limit. */
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
  /** When refused: the maximum of the counter that refused (the X-RateLimit-Limit of the 429). */
  limit: number;
}

/**
 * Reserves one attempt on every counter before the credential is checked, atomically across every
 * instance: one statement (`reserve_attempts`, migration 20261211000000_attempt_counters) locks the
 * counters' rows, checks them all and, when none has reached its maximum, counts on every one. When
 * one has, nothing is counted and `retryAfterSeconds` says how long to wait. A reserved attempt
 * counts as a failure unless `releaseAttempt` gives it back, so N concurrent guesses get at most
 * `max` checks. The counters are rows in PostgreSQL, not Redis keys: a Redis outage changes nothing
 * here (sign-in needs the database anyway), and a lock-out holds on every api process.
 */
export async function reserveAttempt(db: Knex, counters: AttemptCounter[]): Promise<Reservation> {
  const { rows } = await db.raw<{ rows: Array<{ wait: string }> }>(
    'SELECT reserve_attempts(?::text[], ?::int[], ?::bigint[]) AS wait',
    [counters.map((c) => c.key), counters.map((c) => c.limit.max), counters.map((c) => c.limit.windowSeconds * 1000)],
  );
  const waitMs = Number(rows[0].wait);
  return waitMs > 0
    ? { retryAfterSeconds: Math.ceil(waitMs / 1000), counters: [], limit: await refusingLimit(db, counters) }
    : { retryAfterSeconds: 0, counters, limit: 0 };
}

/**
 * The maximum of the counter that refused an attempt: the full one (the one that holds the wait
 * longest when several are full). Read only on a refusal; the first counter's when it cannot be
 * told (the window ended meanwhile, or the database did not answer).
 */
async function refusingLimit(db: Knex, counters: AttemptCounter[]): Promise<number> {
  if (counters.length === 1) return counters[0].limit.max;
  const { rows } = await db
    .raw<{ rows: Array<{ key: string; count: number }> }>(
      'SELECT key, count FROM attempt_counters WHERE key = ANY(?::text[]) AND expires_at > clock_timestamp() ORDER BY expires_at DESC',
      [counters.map((c) => c.key)],
    )
    .catch(() => ({ rows: [] as Array<{ key: string; count: number }> }));
  for (const r of rows) {
    const counter = counters.find((c) => c.key === r.key);
    if (counter && r.count >= counter.limit.max) return counter.limit.max;
  }
  return counters[0].limit.max;
}

/** Gives a reserved attempt back because it was not a failure (the right password or code). */
export async function releaseAttempt(db: Knex, reservation: Reservation): Promise<void> {
  const keys = reservation.counters.map((c) => c.key);
  if (keys.length === 0) return;
  // Never below zero, and only within the window (a counter cleared or expired meanwhile stays so).
  // Best effort: an attempt that cannot be given back stays counted until its window ends.
  await db
    .raw(
      'UPDATE attempt_counters SET count = count - 1 WHERE key = ANY(?::text[]) AND count > 0 AND expires_at > clock_timestamp()',
      [keys],
    )
    .catch(() => undefined);
}

/** Clears counters altogether, e.g. an account's failures after a successful sign-in. */
async function resetAttempts(db: Knex, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  // Best effort: the credential was right; a failure here must not fail the sign-in.
  await db.raw('DELETE FROM attempt_counters WHERE key = ANY(?::text[])', [keys]).catch(() => undefined);
}

/**
 * The account counter's subject for an address. Unknown addresses are counted like known ones,
 * so the cool-down does not reveal which addresses have accounts.
 */
export function throttleSubjectForEmail(email: string): string {
  return `email:${sha256(email.trim().toLowerCase())}`;
}

/** The account subject and the client IP (null when the real client address is unknown). */
export interface Who {
  subject: string;
  ip: string | null;
}
const accountKey = (subject: string) => `login:account:${subject}`;
/** An IPv6 client is counted by its /64 (`counterAddress`). */
const ipKey = (ip: string) => `login:ip:${counterAddress(ip)}`;

/** The sign-in counters of an attempt: the account's, and the IP's when the client address is known. */
function loginCounters(who: Who): AttemptCounter[] {
  const counters = [{ key: accountKey(who.subject), limit: LOGIN_THROTTLE.account }];
  if (who.ip) counters.push({ key: ipKey(who.ip), limit: LOGIN_THROTTLE.ip });
  return counters;
}

/** Reserves a sign-in attempt on the account's and the IP's counters (see `reserveAttempt`). */
export function reserveLoginAttempt(db: Knex, who: Who): Promise<Reservation> {
  return reserveAttempt(db, loginCounters(who));
}

/**
 * Reserves a code check on the IP's sign-in counter alone: wrong 2FA codes count per IP like failed
 * passwords (decisions.md), beside the per-account 2FA lock-out. Release it when the code was right.
 */
export function reserveIpAttempt(db: Knex, ip: string): Promise<Reservation> {
  return reserveAttempt(db, [{ key: ipKey(ip), limit: LOGIN_THROTTLE.ip }]);
}

/**
 * Reserves a registration on the client IP's counter (`register:ip:<ip>`, an IPv6 client by its /64, RATE_LIMIT_REGISTER per
 * RATE_LIMIT_REGISTER_WINDOW_SECONDS) before the password is hashed: each registration costs a
 * 64 MiB argon2 hash (~0.5 s of CPU), and the anonymous tier alone let one IP ask for 120 a minute.
 * Every registration counts, to a taken address or a free one alike (the answer must not differ),
 * and none is given back.
 */
export function reserveRegistration(db: Knex, ip: string, tier: { limit: number; windowSeconds: number }) {
  return reserveAttempt(db, [
    { key: `register:ip:${counterAddress(ip)}`, limit: { max: tier.limit, windowSeconds: tier.windowSeconds } },
  ]);
}

/** A successful sign-in (or a password reset) clears the account's counter; the IP's stays. */
export async function clearLoginFailures(db: Knex, subject: string): Promise<void> {
  await resetAttempts(db, [accountKey(subject)]);
}
