import Redis, { RedisOptions } from 'ioredis';
import type { Config } from './config';
import type { Logger } from './logger';
import { OutageLog } from './outageLog';

/**
 * Redis connections. Keys are prefixed explicitly with `redisKey()` rather than ioredis' keyPrefix,
 * because BullMQ refuses keyPrefix and pub/sub channels ignore it: one prefix rule for all three.
 */
export function createRedis(config: Config, opts: RedisOptions = {}): Redis {
  const redis = new Redis(config.redisUrl, {
    lazyConnect: false,
    maxRetriesPerRequest: null,
    // ioredis ≥ 5.8.2 sends CLIENT SETINFO during the handshake, which lets a SUBSCRIBE issued while
    // connecting reach Redis before the ready check's INFO; Redis then refuses INFO on the subscriber
    // connection ("Connection in subscriber mode…", redis/ioredis#2037). Without the client info the
    // ready check runs first again. Duplicates inherit the option.
    disableClientInfo: true,
    ...opts,
  });
  return typeof opts.commandTimeout === 'number' ? breakOnStall(redis, config.redisUrl) : redis;
}

const STALLED = 'redis is not answering (a command timed out; waiting for it to answer again)';

/** How long the PING that confirms a stall may take: a Redis that answers does so in well under this. */
const PROBE_TIMEOUT_MS = 250;

/** Per Redis server (by URL): whether it stopped answering this process's fail-fast connections. */
interface StallState {
  stalled: boolean;
  probing: boolean;
  /** Each connection with its own (unwrapped) sendCommand, to probe through whichever is open. */
  connections: Map<Redis, Redis['sendCommand']>;
}
const stalls = new Map<string, StallState>();

/**
 * PINGs the server through an open connection: an answer clears a stall; no answer within
 * PROBE_TIMEOUT_MS confirms one (the commands in flight fail at once) and is tried again every
 * FAIL_FAST_COMMAND_TIMEOUT_MS until the server answers or a connection reconnects.
 */
function probe(state: StallState): void {
  if (state.probing) return;
  const open = [...state.connections].find(([c]) => c.status === 'ready');
  const again = () => setTimeout(() => probe(state), FAIL_FAST_COMMAND_TIMEOUT_MS).unref();
  // None open: each reconnect clears the stall itself ('ready'); until then, look again later.
  if (!open) return void (state.stalled && again());
  state.probing = true;
  const ping = new Redis.Command('ping', []);
  ping.setTimeout(PROBE_TIMEOUT_MS);
  void open[1](ping);
  ping.promise.then(
    () => {
      state.probing = false;
      state.stalled = false;
    },
    () => {
      state.probing = false;
      if (!state.stalled) {
        state.stalled = true;
        // The commands in flight, each connection's sent and unanswered ones (ioredis' own queue),
        // fail at once too. One already answered is settled, and rejecting it does nothing.
        for (const connection of state.connections.keys())
          for (const { command } of connection.commandQueue.toArray()) command.reject(new Error(STALLED));
      }
      again();
    },
  );
}

/**
 * A fail-fast connection whose command timed out may be stalled: Redis took the connection but
 * stopped answering, and it answers in order, so every command sent after it would wait its own
 * full timeout. One request would pay the timeout once per command it sends (the rate limiter,
 * then the latest-GPS cache, then its clean-up: 3 s). A timeout sends a PING (probe): a server
 * that does not answer it either is stalled, and until it answers again the commands of every
 * fail-fast connection of this process to it fail at once, those in flight included. (A timeout
 * alone does not stop anything: a command whose answer waited behind a long pause of this process
 * times out as well.) The callers fall back as for any failed command (shared/outbox.ts, the caches'
 * database reads, the rate limiter failing open).
 */
function breakOnStall(redis: Redis, url: string): Redis {
  let state = stalls.get(url);
  if (!state) stalls.set(url, (state = { stalled: false, probing: false, connections: new Map() }));
  const shared = state;
  const onFailure = (err: Error) => {
    if (err.message === 'Command timed out' && !shared.stalled) probe(shared);
  };
  const send = redis.sendCommand.bind(redis);
  shared.connections.set(redis, send);
  redis.on('end', () => shared.connections.delete(redis));
  redis.on('ready', () => {
    shared.stalled = false;
  });
  redis.sendCommand = ((command, stream) => {
    if (shared.stalled) {
      command.reject(new Error(STALLED));
      return command.promise;
    }
    const answer = send(command, stream);
    // No per-command bookkeeping of our own: a long-lived Set that gained and lost each command
    // kept every command (its arguments, its reply) alive through scavenges until the next full
    // GC (README, "Garbage dies young"); the commands in flight are in ioredis' queue anyway.
    command.promise.then(undefined, onFailure);
    return answer;
  }) as Redis['sendCommand'];
  return redis;
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
 * What the process's fail-fast Redis connection says while Redis is down or not answering:
 * ioredis's own messages, and the one of a stall the process detected.
 */
const REDIS_UNAVAILABLE =
  /^(Connection is closed\.|Stream isn't writeable and enableOfflineQueue options is false|Command timed out|redis is not answering|Reached the max retries per request limit)/;

/** Whether `err` says Redis is down or not answering (not that a command was wrong). */
export function isRedisUnavailable(err: unknown): boolean {
  return err instanceof Error && REDIS_UNAVAILABLE.test(err.message);
}

/**
 * The log of one process's Redis connection errors. ioredis emits an 'error' on every connection
 * at every failed reconnect attempt, and BullMQ's workers pass theirs on, so an outage would write
 * several lines a second per process (a workers process has a connection per queue). They are
 * folded by the process's OutageLog for Redis (shared/outageLog.ts): each distinct message is
 * logged at once as "redis error", then at most every 10 s with how many repeats it stands for
 * (`repeated`); the first connection ready again after errors logs "redis reachable again" (info)
 * with the count folded since the last line and the outage's length (`outageMs`).
 */
export class RedisErrorLog {
  private readonly outage: OutageLog;

  constructor(logger: Logger, intervalMs?: number) {
    this.outage = new OutageLog(logger, 'redis', { intervalMs });
  }

  /** Logs `redis`'s errors (warn) and its recovery, naming it `connection`. */
  watch(redis: Redis, connection: string): Redis {
    redis.on('error', this.listener(connection));
    redis.on('ready', () => this.outage.answered());
    return redis;
  }

  /** An 'error' listener for `connection` (a BullMQ worker's, say) at `level`. */
  listener(connection: string, level: 'warn' | 'error' = 'warn'): (err: Error) => void {
    return (err) => this.outage.failure('redis error', err.message, { connection, err: err.message }, level);
  }
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
  /** Counter: mails to addresses of the user's choosing (email change, email link) in the current hour. */
  addressMails: (userId: string) => `addressmails:${userId}`,
  /** Counter: requests of one identity in one rate-limit window. */
  rateLimit: (tier: string, identity: string, window: number) => `rl:${tier}:${identity}:${window}`,
  /** String (SET NX): a TOTP time step already accepted for a user's secret (`<user id>:<secret hash>`), so a code is accepted once on any instance. */
  twoFactorUsedStep: (subject: string, step: number) => `2fa:step:${subject}:${step}`,
  /** String (SET NX): a sign-in challenge already finished, by the challenge token's SHA-256. */
  twoFactorChallengeUsed: (tokenHash: string) => `2fa:challenge:${tokenHash}`,
  /** Hash/strings: the newest GPS point overall and per device. */
  gpsLatest: 'gps:latest',
  gpsLatestDevice: (deviceId: string) => `gps:latest:device:${deviceId}`,
  /** Bumped by every drop of a latest-point key: a fill that read the database before it is not stored. */
  gpsLatestGeneration: 'gps:latest:gen',
  gpsLatestDeviceGeneration: (deviceId: string) => `gps:latest:gen:device:${deviceId}`,
  /** String: whether a device is inside a geofence (for enter/exit events), with a pending change (min_dwell_seconds). */
  geofenceState: (deviceId: string, geofenceId: string) => `geofence:state:${deviceId}:${geofenceId}`,
  /** String: the public statistics (GET /v1/stats/public), cached for a minute. */
  publicStats: 'stats:public',
  /** String: a cached PEGELONLINE stations answer ({fetched_at, stations}), by its query. */
  pegelStations: (query: string) => `pegel:stations:${query}`,
  /**
   * String: the `fetched_at` of `pegelStations(query)`, written with it in one MULTI, so an instance
   * holding that answer decoded knows it is still current without reading it again.
   */
  pegelStamp: (query: string) => `pegel:stamp:${query}`,
  /** String: the lock of the one instance fetching `pegelStations(query)` from upstream. */
  pegelFetchLock: (query: string) => `pegel:lock:${query}`,
  /** Hash: the last level_cm seen per station uuid (trend when upstream gives none). */
  pegelLevels: 'pegel:levels',
  /** Counter: data exports one user asked for in one hour window (EXPORT_RATE_LIMIT_PER_HOUR). */
  exportRate: (userId: string, window: number) => `export:rate:${userId}:${window}`,
  /** String (binary): a finished data export ZIP, from the worker to the api; short TTL, deleted once downloaded. */
  exportArchive: (id: string) => `export:archive:${id}`,
  /** Counter: requests of one user waiting for an export; the last one to download deletes the archive. */
  exportWaiters: (userId: string) => `export:waiters:${userId}`,
  /** String: a pending stream-integration connect (user, redirect_uri, scopes), by the state's SHA-256 (single use, 10 min). */
  integrationState: (stateHash: string) => `integration:state:${stateHash}`,
  /** Hash: scheduled chat auto-sync state (botSeenAt, lastSyncAt; Unix ms). */
  chatAutoSync: 'chat:autosync',
  /** BullMQ's own keys live under this prefix (see bullPrefix in shared/queues.ts). */
  bull: 'bull',
  /** String: the worker instance holding the AIS feed lease (value: its token; PX lease). */
  aisLease: 'ais:lease',
  /** Hash: MMSI → merged vessel state (JSON, shared/domain/ais.ts VesselState). */
  aisVessels: 'ais:vessels',
  /** Sorted set: MMSI scored by when it was last heard (ms), for expiry. */
  aisVesselsSeen: 'ais:vessels:seen',
  /** Hash: AIS ingestion status (connected, sentences, errors, vessels, at) for /health. */
  aisStatus: 'ais:status',
  /** Set: the geofences a device is inside (or pending inside), so an exit far from the fence is seen. */
  geofenceInside: (deviceId: string) => `geofence:inside:${deviceId}`,
  /**
   * Sorted set (all scores 0, members ordered by name): the sort keys (gpsSortKey, ending in the
   * point's id) of a device's points queued for geofence evaluation and not yet evaluated.
   */
  geofencePending: (deviceId: string) => `geofence:pending:${deviceId}`,
  /**
   * List: geofence transitions (JSON) whose recording failed, as releases before the pending
   * transitions below kept them; evaluations still record and publish what it holds (an upgrade).
   */
  geofenceUnrecorded: 'geofence:unrecorded',
  /**
   * Sorted set (all scores 0, members ordered by name): a device's geofence transitions the state
   * script confirmed and whose event is not published yet (`<sort key>|<fence id>|<inside 0|1>`),
   * added by the script itself and taken off by the publish, so a run cut off in between leaves
   * them for the next evaluation of the device.
   */
  geofenceTransitions: (deviceId: string) => `geofence:transitions:${deviceId}`,
} as const;

/** `prefix + parts.join(':')`: the only way a Redis key or channel name is built. */
export function redisKey(config: Pick<Config, 'redisPrefix'>, ...parts: Array<string | number>): string {
  return config.redisPrefix + parts.join(':');
}
