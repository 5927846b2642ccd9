import type Redis from 'ioredis';
import type { StoredCredential } from '../auth/credentials';
import type { Config } from '../config';
import { randomToken, sha256 } from '../crypto';
import { serviceUnavailable } from '../errors';
import { redisKey, RedisKeys } from '../redis';

/**
 * The `state` of a stream-integration connect (spec §4.25): random, single use, valid for 10
 * minutes, bound to the user who asked, the platform and the client's redirect_uri. Redis holds it
 * under the state's SHA-256 (the value itself is only compared); taking it is one GETDEL, so two
 * callbacks racing with the same state cannot both win.
 */
export const STATE_TTL_SECONDS = 600;

export interface PendingConnect {
  userId: string;
  platform: string;
  redirectUri: string;
  scopes: string[];
  /** The credential that started the connect (its hash, never the token): it must still hold at the callback. */
  credential?: StoredCredential;
}

const keyOf = (config: Pick<Config, 'redisPrefix'>, state: string) =>
  redisKey(config, RedisKeys.integrationState(sha256(state)));

/** Stores a fresh state for `pending` and returns it; 503 when Redis cannot take it (a connect cannot work without). */
export async function issueConnectState(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  pending: PendingConnect,
): Promise<string> {
  const state = randomToken('', 24);
  try {
    await redis.set(keyOf(config, state), JSON.stringify(pending), 'EX', STATE_TTL_SECONDS);
  } catch {
    throw serviceUnavailable('cannot start the connection: the state store is unavailable; try again shortly');
  }
  return state;
}

/** Takes the state (single use): what it was issued for, or null when unknown, expired or already used. */
export async function takeConnectState(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  state: string,
): Promise<PendingConnect | null> {
  let raw: string | null;
  try {
    raw = await redis.getdel(keyOf(config, state));
  } catch {
    throw serviceUnavailable('cannot complete the connection: the state store is unavailable; try again shortly');
  }
  if (!raw) return null;
  try {
    return JSON.parse(raw) as PendingConnect;
  } catch {
    return null;
  }
}
