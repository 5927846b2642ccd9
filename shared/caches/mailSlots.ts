import type Redis from 'ioredis';
import type { Config } from '../config';
import { sha256 } from '../crypto';
import { redisKey, RedisKeys } from '../redis';

/** At most one mail of a kind per address per minute, so the anonymous endpoints cannot flood a mailbox. */
const MAIL_INTERVAL_SECONDS = 60;

/** What a claim of a mail slot found: claimed now, taken (a mail went out within the interval), or unknown (Redis did not answer). */
export type MailSlotClaim = 'claimed' | 'taken' | 'unknown';

const slotKey = (config: Pick<Config, 'redisPrefix'>, kind: string, email: string) =>
  redisKey(config, RedisKeys.mailSlot(kind, sha256(email)));

/** Claims the per-address mail slot of a kind (SET NX with the interval as expiry). */
async function claimMailSlotState(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  kind: string,
  email: string,
): Promise<MailSlotClaim> {
  return redis.set(slotKey(config, kind, email), '1', 'EX', MAIL_INTERVAL_SECONDS, 'NX').then(
    (r) => (r === 'OK' ? 'claimed' : 'taken'),
    () => 'unknown',
  );
}

/**
 * Claims the slot for `owner` (a job's id): true when it is claimed now or was by the same owner
 * before (a job run again after its worker died finds its own claim), false when another mail took
 * it. Throws when Redis does not answer: a job is retried.
 */
export async function claimMailSlotFor(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  kind: string,
  email: string,
  owner: string,
): Promise<boolean> {
  const key = slotKey(config, kind, email);
  if ((await redis.set(key, owner, 'EX', MAIL_INTERVAL_SECONDS, 'NX')) === 'OK') return true;
  return (await redis.get(key)) === owner;
}

/**
 * Runs `write` (the database write that makes the mail) under the address's mail slot of `kind`:
 * not at all when a mail of that kind went to the address within the interval, and with the slot
 * given back when `write` fails, so a request answered 503 (the database unreachable, say) does
 * not use up the slot its retry needs. `write` is told whether the slot was claimed or Redis could
 * not say (fail-open: then whatever sends the mail later may claim it, see `claimMailSlotState`).
 */
export async function withMailSlot<T>(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  kind: string,
  email: string,
  write: (claim: 'claimed' | 'unknown') => Promise<T>,
): Promise<T | undefined> {
  const claim = await claimMailSlotState(redis, config, kind, email);
  if (claim === 'taken') return undefined;
  try {
    return await write(claim);
  } catch (err) {
    if (claim === 'claimed') await redis.del(slotKey(config, kind, email)).catch(() => undefined);
    throw err;
  }
}

/**
 * Mails a signed-in user sends to an address of their choosing (email change, email link): at most
 * one per address per minute (either flow), and ADDRESS_MAILS_PER_HOUR per user per hour, so an
 * account cannot be used to flood someone else's mailbox from the service's domain.
 */
export const ADDRESS_MAILS_PER_HOUR = 10;

/*
 * KEYS: address slot, user counter. ARGV: slot seconds, counter seconds, counter max. Returns ms to
 * wait for the address's slot, minus the ms to wait for the account's hourly cap, 0 = go.
 */
const CLAIM_ADDRESS_MAIL = `
local slot = redis.call('PTTL', KEYS[1])
if slot > 0 then return slot end
local n = tonumber(redis.call('GET', KEYS[2]) or '0')
if n >= tonumber(ARGV[3]) then
  local left = redis.call('PTTL', KEYS[2])
  if left > 0 then return -left end
end
redis.call('SET', KEYS[1], '1', 'EX', ARGV[1])
if redis.call('INCR', KEYS[2]) == 1 or redis.call('PTTL', KEYS[2]) < 0 then redis.call('EXPIRE', KEYS[2], ARGV[2]) end
return 0`;

/**
 * Claims the right to mail `email` on behalf of `userId` (see ADDRESS_MAILS_PER_HOUR): `wait` 0
 * when the mail may go out, else the seconds to wait and the `limit` that refused (1 for the
 * address's slot, ADDRESS_MAILS_PER_HOUR for the account's cap); `claimed` when Redis counted it (fails open
 * when Redis does not answer, as withMailSlot does: then nothing was counted, and nothing is given back).
 */
export async function claimAddressMail(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  userId: string,
  email: string,
): Promise<{ wait: number; claimed: boolean; limit: number }> {
  return redis
    .eval(
      CLAIM_ADDRESS_MAIL,
      2,
      redisKey(config, RedisKeys.mailSlot('address', sha256(email))),
      redisKey(config, RedisKeys.addressMails(userId)),
      MAIL_INTERVAL_SECONDS,
      3600,
      ADDRESS_MAILS_PER_HOUR,
    )
    .then(
      (ms) => {
        const n = Number(ms);
        // Negative: the account's hourly cap refused, not the address's one mail per minute.
        return { wait: Math.ceil(Math.abs(n) / 1000), claimed: n === 0, limit: n < 0 ? ADDRESS_MAILS_PER_HOUR : 1 };
      },
      () => ({ wait: 0, claimed: false, limit: 0 }),
    );
}

/* KEYS: address slot, user counter. Gives back what CLAIM_ADDRESS_MAIL took. */
const GIVE_BACK_ADDRESS_MAIL = `
redis.call('DEL', KEYS[1])
local n = tonumber(redis.call('GET', KEYS[2]) or '0')
if n > 0 then redis.call('DECR', KEYS[2]) end
return 1`;

/**
 * Gives back a claim of claimAddressMail whose mail was not written (the database write failed):
 * the retry the client is told to make is not refused for a mail that never went out.
 */
export async function giveBackAddressMail(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  userId: string,
  email: string,
): Promise<void> {
  await redis
    .eval(
      GIVE_BACK_ADDRESS_MAIL,
      2,
      redisKey(config, RedisKeys.mailSlot('address', sha256(email))),
      redisKey(config, RedisKeys.addressMails(userId)),
    )
    .catch(() => undefined);
}
