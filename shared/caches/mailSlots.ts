import type Redis from 'ioredis';
import type { Config } from '../config';
import { sha256 } from '../crypto';
import { redisKey, RedisKeys } from '../redis';

/** At most one mail of a kind per address per minute, so the anonymous endpoints cannot flood a mailbox. */
const MAIL_INTERVAL_SECONDS = 60;

/** Claims the per-address mail slot of a kind; true when a mail may go out (fail-open without Redis). */
export async function claimMailSlot(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  kind: string,
  email: string,
): Promise<boolean> {
  const r = await redis
    .set(redisKey(config, RedisKeys.mailSlot(kind, sha256(email))), '1', 'EX', MAIL_INTERVAL_SECONDS, 'NX')
    .catch(() => 'OK');
  return r === 'OK';
}
