import Redis, { RedisOptions } from 'ioredis';
import type { Config } from './config';

/**
 * Redis connections. Keys are prefixed explicitly with `redisKey()` rather than ioredis' keyPrefix,
 * because BullMQ refuses keyPrefix and pub/sub channels ignore it: one prefix rule for all three.
 */
export function createRedis(config: Config, opts: RedisOptions = {}): Redis {
  return new Redis(config.redisUrl, {
    lazyConnect: false,
    maxRetriesPerRequest: null,
    // ioredis ≥ 5.8.2 sends CLIENT SETINFO during the handshake, which lets a SUBSCRIBE issued while
    // connecting reach Redis before the ready check's INFO; Redis then refuses INFO on the subscriber
    // connection ("Connection in subscriber mode…", redis/ioredis#2037). Without the client info the
    // ready check runs first again. Duplicates inherit the option.
    disableClientInfo: true,
    ...opts,
  });
}

/** The longest a command on a fail-fast connection may take (a hung or unreachable Redis). */
const FAIL_FAST_COMMAND_TIMEOUT_MS = 1000;

/**
 * Options of the connection requests use (caches, tickets, publishes, queue producers): while Redis
 * is not connected a command fails at once instead of waiting in ioredis' offline queue, and a sent
 * command fails after FAIL_FAST_COMMAND_TIMEOUT_MS. Callers fall back (the latest-GPS cache reads
 * the database) or leave the work to the side-effect outbox (shared/outbox.ts).
 */
export const FAIL_FAST: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  commandTimeout: FAIL_FAST_COMMAND_TIMEOUT_MS,
};

/**
 * Options of connections that wait for Redis instead (blocking readers such as BullMQ's
 * QueueEvents, subscribers): offline queue on, unlimited retries, no command timeout. Pass to
 * `duplicate()` of a fail-fast connection, whose options it would otherwise inherit.
 */
export const WAIT_FOR_REDIS: RedisOptions = {
  enableOfflineQueue: true,
  maxRetriesPerRequest: null,
  commandTimeout: undefined,
};

/**
 * Resolves true once `redis` is ready, false at its first connection error or after `timeoutMs`:
 * a fail-fast connection refuses commands until it is ready, so a process waits for it at start,
 * but not for a Redis that is down.
 */
export function redisReady(redis: Redis, timeoutMs: number): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      redis.off('error', onError);
      resolve(ok);
    };
    const onReady = () => done(true);
    const onError = () => done(false);
    const timer = setTimeout(() => done(false), timeoutMs);
    redis.once('ready', onReady);
    redis.once('error', onError);
  });
}

/**
 * Registry of Redis key families, beside the pub/sub channel registry (`PubSub` in shared/events.ts):
 * every key a process reads or writes is named here, so two features can never pick the same family
 * and an operator can see what lives in Redis. Pass the result to `redisKey()` for the deployment's
 * prefix. Never rename a family in use: running instances of the old version would lose their state.
 */
export const RedisKeys = {
  /** Hash: connection and subscription counts each realtime instance reports. */
  wsStats: 'ws:stats',
  /** String: a WebSocket ticket's principal, by the ticket's SHA-256 (single use, short TTL). */
  wsTicket: (ticketHash: string) => `ws:ticket:${ticketHash}`,
  /** String: a used ID-app assertion nonce, so an assertion replays never. */
  assertionNonce: (nonce: string) => `idaa:${nonce}`,
  /** String: one mail of a kind per address per interval (registration, reset), by the address hash. */
  mailSlot: (kind: string, emailHash: string) => `mailslot:${kind}:${emailHash}`,
  /** Counter: requests of one identity in one rate-limit window. */
  rateLimit: (tier: string, identity: string, window: number) => `rl:${tier}:${identity}:${window}`,
  /** Counters: failed logins per account subject and per IP. */
  loginFailAccount: (subject: string) => `loginfail:acct:${subject}`,
  loginFailIp: (ip: string) => `loginfail:ip:${ip}`,
  /** Hash/strings: the newest GPS point overall and per device. */
  gpsLatest: 'gps:latest',
  gpsLatestDevice: (deviceId: string) => `gps:latest:device:${deviceId}`,
  /** String: whether a device is inside a geofence (for enter/exit events). */
  geofenceState: (deviceId: string, geofenceId: string) => `geofence:state:${deviceId}:${geofenceId}`,
  /** Hash: scheduled chat auto-sync state (botSeenAt, lastSyncAt; Unix ms). */
  chatAutoSync: 'chat:autosync',
  /** BullMQ's own keys live under this prefix (see bullPrefix in shared/queues.ts). */
  bull: 'bull',
} as const;

/** `prefix + parts.join(':')`: the only way a Redis key or channel name is built. */
export function redisKey(config: Pick<Config, 'redisPrefix'>, ...parts: Array<string | number>): string {
  return config.redisPrefix + parts.join(':');
}
