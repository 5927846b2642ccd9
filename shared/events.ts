import { randomUUID } from 'node:crypto';
import type Redis from 'ioredis';
import type { Config } from './config';
import type { AuditEventData } from './presenters/auditEvent';
import { redisKey } from './redis';

/**
 * Pub/sub registry: every message that crosses a process boundary by Redis pub/sub is named here.
 * Pub/sub is for fan-out (every realtime/api instance needs every message); work goes on a queue.
 * Never rename a live channel: running instances of the old version would stop hearing each other.
 */
export const PubSub = {
  /** Messages for WebSocket channel `<name>`; the payload is the exact JSON text frame. */
  ws: (wsChannel: string) => `ws:${wsChannel}`,
  wsPattern: 'ws:*',
  /** Cached credentials/permissions to drop on every api and realtime instance. */
  authInvalidate: 'auth:invalidate',
  /** Acknowledgements of an invalidation, back to the publisher that waits for them. */
  authAck: (publisherId: string) => `auth:ack:${publisherId}`,
  /** Replies to requests a realtime instance forwarded to a worker (bot/service protobuf requests). */
  rpcReply: (instanceId: string) => `rpc:reply:${instanceId}`,
  /** Requests for a chat bot connected to realtime instance `instanceId` (chat sync, moderation). */
  botRequest: (instanceId: string) => `rpc:bot:${instanceId}`,
  /** A system config key changed: every process drops its cached value (shared/caches/systemConfig.ts). */
  systemConfigChanged: 'config:changed',
} as const;

/**
 * Internal WebSocket channel of chat bot connections: publish chatUserLinked, chatUserUnlinked and
 * chatPermissionChanged here; bots receive them as protobuf (clients cannot subscribe to it).
 */
export const CHAT_BOTS_WS_CHANNEL = 'bots:chat';

/** WebSocket channel of the live audit feed: every new audit event as an `auditEvent` push (REST shape). */
export const ADMIN_AUDIT_WS_CHANNEL = 'admin:audit';

/**
 * Channels whose every push on a sub-channel `<base>:<x>` is also published on `<base>` itself: a
 * gpsUpdate goes to `gps` and `gps:<device>`, a geofenceEvent to `geofence` and
 * `geofence:<geofence id>`. A connection subscribed to both gets the push once, from the base
 * channel (realtime/fanout.ts): a push carries no channel field, so a second copy could not be
 * told from a second point. A publisher of these types keeps the rule.
 */
export const MIRRORED_WS_CHANNELS: ReadonlySet<string> = new Set(['gps', 'geofence']);

/** GPS point as pushed to clients (spec §6 gpsUpdate data, snake_case). */
export interface GpsPushData {
  id: string;
  device_id: string | null;
  trip_id: string | null;
  latitude: number;
  longitude: number;
  altitude: number | null;
  heading: number | null;
  timestamp: string;
  speed_kmh: number;
  speed_mps: number;
  speed_mph: number;
  speed_knots: number;
  pdop: number | null;
  hdop: number | null;
  vdop: number | null;
  created_at: string;
}

/** Every server push of spec §6 and decisions.md, as JSON text frames (camelCase type). */
export type ServerPush =
  | { type: 'gpsUpdate'; data: GpsPushData }
  | { type: 'vesselsUpdate'; data: { vessels: unknown[] } }
  | {
      type: 'geofenceEvent';
      data: {
        geofence_id: string;
        geofence_name: string;
        event: 'enter' | 'exit';
        device_id: string | null;
        distance_km: number;
        metadata: Record<string, unknown> | null;
      };
    }
  | { type: 'message'; channel: string; data: string }
  | { type: 'accountDeleted'; userId: string; reason: string; timestamp: string }
  | {
      type: 'accountBanned';
      userId: string;
      reason: string | null;
      expiresAt: string | null;
      isPermanent: boolean;
      timestamp: string;
    }
  | { type: 'sessionRevoked'; userId: string; sessionId: string; reason: string; timestamp: string }
  | { type: 'forceLogout'; userId: string; reason: string; timestamp: string }
  | { type: 'permissionsUpdated'; userId: string; permissions: string[]; timestamp?: string }
  | { type: 'rolesUpdated'; userId: string; roles: string[]; roleIds: string[]; timestamp: string }
  | { type: 'rolePermissionsChanged'; roleId: string; roleName: string; timestamp?: string }
  | { type: 'oauthConsentRevoked'; userId: string; clientId: string; timestamp: string }
  | { type: 'emailLinkVerified'; userId: string; platformAccountId: string; timestamp: string }
  | { type: 'emailChangeVerified'; userId: string; email: string; timestamp: string }
  | { type: 'auditEvent'; data: AuditEventData }
  // Protobuf-only bot events (spec §6), published on CHAT_BOTS_WS_CHANNEL.
  | {
      type: 'chatUserLinked';
      chatId: string;
      userId: string;
      chatUsername: string;
      avatarUrl: string | null;
      timestamp: string;
    }
  | { type: 'chatUserUnlinked'; chatId: string; userId: string; timestamp: string }
  | { type: 'chatPermissionChanged'; chatId: string; userId: string; permissions: string[]; timestamp: string }
  // Settings changed (REST or 120): reaches chat bots as an unsolicited ChatSettingsResponse (121).
  | {
      type: 'chatSettingsChanged';
      global: Record<string, unknown>;
      guild?: { guildId: string; defaultLanguage?: string; effectiveLanguage: string };
    };

/**
 * Cached credentials to drop: those of these users (sessions, OAuth tokens, their API keys), of
 * these API keys, or all. One message names every id a change touches (deleting a user with
 * 10,000 keys is one message and one acknowledgement per instance, not 10,000).
 */
export interface AuthInvalidation {
  userIds?: string[];
  apiKeyIds?: string[];
  /** Drop every cached credential (role permission changes). */
  all?: boolean;
}

/** An invalidation on the wire: receivers acknowledge `ackId` on channel `ackTo` once applied. */
export interface AuthInvalidationMessage extends AuthInvalidation {
  ackId?: string;
  ackTo?: string;
}

/** How long a narrowing change waits for every instance to drop its cached credentials. */
const AUTH_ACK_TIMEOUT_MS = 1000;

/**
 * How often each instance PINGs Redis on its invalidation subscription, and how long without an
 * answer makes it stop trusting its credential cache (shared/auth/credentials.ts): a Redis that
 * hangs with its connections open delivers no invalidation, and its connections never close. A
 * narrowing change that could not hear every instance acknowledge it waits until this much has
 * passed since it began (invalidateCredentials), so every instance that did not hear it has stopped
 * using its cache by the time the change answers.
 */
export const SUBSCRIBER_HEARTBEAT_MS = 250;
export const SUBSCRIBER_DEAF_AFTER_MS = 1000;

/**
 * Waits for acknowledgements of published invalidations on one subscriber connection of its own.
 * PUBLISH answers how many connections received the message (every api and realtime instance's
 * invalidation subscriber), so the publisher knows exactly how many acknowledgements to expect; an
 * instance that died has no connection and is not counted, one that hangs costs the timeout.
 */
/** How long the first invalidation waits for the acknowledgement subscription to stand. */
const ACK_SUBSCRIBE_WAIT_MS = 250;

class AckCollector {
  private readonly subscriber: Redis;
  private readonly pending = new Map<string, { got: number; expected: number; done: () => void }>();
  readonly channel: string;
  readonly ready: Promise<boolean>;
  /** Whether the subscription stands (set once `ready` resolves true). */
  isReady = false;
  /** Whether a caller already waited for `ready` in vain: later ones do not wait again. */
  waitedInVain = false;

  constructor(redis: Redis, config: Pick<Config, 'redisPrefix'>) {
    this.channel = redisKey(config, PubSub.authAck(randomUUID()));
    this.subscriber = redis.duplicate({ maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: false });
    this.subscriber.on('error', () => undefined);
    this.subscriber.on('message', (ch: string, id: string) => {
      if (ch !== this.channel) return;
      const w = this.pending.get(id);
      if (w && ++w.got >= w.expected) w.done();
    });
    this.ready = new Promise<void>((resolve, reject) => {
      if (this.subscriber.status === 'ready') resolve();
      else {
        this.subscriber.once('ready', resolve);
        this.subscriber.once('end', () => reject(new Error('ack subscriber closed')));
      }
    })
      .then(() => this.subscriber.subscribe(this.channel))
      .then(
        () => (this.isReady = true),
        () => false,
      );
  }

  /** Waits registered and not yet finished (a test's check that none is left behind). */
  get waiting(): number {
    return this.pending.size;
  }

  /**
   * Registers a wait for `id`; `arm(expected)` starts counting against the number of receivers,
   * `cancel()` drops it when there is nothing to wait for (the publish failed).
   */
  expect(id: string): { arm(expected: number, timeoutMs: number): Promise<boolean>; cancel(): void } {
    const entry = { got: 0, expected: Infinity, done: () => undefined as void };
    this.pending.set(id, entry);
    return {
      cancel: () => void this.pending.delete(id),
      arm: (expected, timeoutMs) =>
        new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => finish(false), timeoutMs);
          const finish = (ok: boolean) => {
            clearTimeout(timer);
            this.pending.delete(id);
            resolve(ok);
          };
          entry.expected = expected;
          entry.done = () => finish(true);
          if (entry.got >= expected) finish(true);
        }),
    };
  }

  close(): void {
    this.subscriber.disconnect();
  }
}

/** Pushes per publishMany script run (a GPS batch of 1,000 points on two channels is one). */
const PUBLISH_MANY_CHUNK = 2_000;

/**
 * ARGV: channel, message, channel, message… (channels are not keys, so they go in ARGV). Answers
 * the fewest receivers any of the messages had.
 */
const PUBLISH_MANY_SCRIPT = `local fewest = -1
for i = 1, #ARGV, 2 do
  local n = redis.call('PUBLISH', ARGV[i], ARGV[i + 1])
  if fewest < 0 or n < fewest then fewest = n end
end
return fewest`;

/**
 * A WebSocket channel no client can subscribe to (realtime/access.ts refuses the name), for
 * counting the realtime instances that receive pushes (`EventBus.wsReceivers`).
 */
const WS_PROBE_CHANNEL = '#receivers';

/** Typed publisher; services call this and never touch sockets. */
export class EventBus {
  constructor(
    private readonly redis: Redis,
    private readonly config: Pick<Config, 'redisPrefix'>,
  ) {}

  /** Publishes one push to a WebSocket channel, serialised once here for every receiver. */
  async publish(wsChannel: string, message: ServerPush): Promise<void> {
    await this.redis.publish(redisKey(this.config, PubSub.ws(wsChannel)), JSON.stringify(message));
  }

  /**
   * Publishes many pushes, in order, as one Redis command (a script calling PUBLISH for each) per
   * PUBLISH_MANY_CHUNK pushes, e.g. every point of a GPS batch, or a role change's pushes to each of
   * its 10,000 holders: a few commands instead of thousands for both client and server, and no
   * script long enough to hold Redis up. Answers the fewest receivers any push had.
   */
  async publishMany(items: Array<{ channel: string; message: ServerPush }>): Promise<number> {
    if (items.length === 0) return 0;
    const redis = this.redis as Redis & { publishMany?: (...args: string[]) => Promise<number> };
    if (!redis.publishMany) redis.defineCommand('publishMany', { numberOfKeys: 0, lua: PUBLISH_MANY_SCRIPT });
    // A push sent on several channels (gps and gps:<device>) is serialised once.
    const texts = new Map<ServerPush, string>();
    let fewest = Infinity;
    for (let from = 0; from < items.length; from += PUBLISH_MANY_CHUNK) {
      const args: string[] = [];
      for (const { channel, message } of items.slice(from, from + PUBLISH_MANY_CHUNK)) {
        let text = texts.get(message);
        if (text === undefined) texts.set(message, (text = JSON.stringify(message)));
        args.push(redisKey(this.config, PubSub.ws(channel)), text);
      }
      fewest = Math.min(fewest, await redis.publishMany!(...args));
    }
    return fewest;
  }

  /**
   * How many subscribers receive WebSocket pushes now: every realtime instance subscribes to all
   * of them (one pattern), so this is the number of realtime instances subscribed. A probe PUBLISH
   * on a channel no client can hold; the realtime instances drop it.
   */
  wsReceivers(): Promise<number> {
    return this.redis.publish(redisKey(this.config, PubSub.ws(WS_PROBE_CHANNEL)), '{}');
  }

  /** Shortcut for pushes on `user:{id}`. */
  async publishToUser(userId: string, message: ServerPush): Promise<void> {
    await this.publish(`user:${userId.toLowerCase()}`, message);
  }

  private acks?: AckCollector;

  /**
   * Publishes a credential invalidation and resolves once every api and realtime instance has
   * applied it (or after AUTH_ACK_TIMEOUT_MS; the straggler is reported): a narrowing change
   * (revocation, demotion, ban, deletion) holds on the very next request, whichever instance gets it.
   * Returns false when some instance did not acknowledge in time.
   */
  async invalidateAuth(msg: AuthInvalidation, timeoutMs = AUTH_ACK_TIMEOUT_MS): Promise<boolean> {
    const channel = redisKey(this.config, PubSub.authInvalidate);
    this.acks ??= new AckCollector(this.redis, this.config);
    const acks = this.acks;
    // The ack subscriber is waited for once: while Redis stays hung after that, each narrowing
    // change would otherwise wait the whole timeout for a subscription that does not come.
    let subscribed = acks.isReady;
    if (!subscribed && !acks.waitedInVain) {
      subscribed = await Promise.race([
        acks.ready,
        // A healthy Redis subscribes in milliseconds; the publish below has its own timeout.
        new Promise<false>((r) => setTimeout(() => r(false), Math.min(timeoutMs, ACK_SUBSCRIBE_WAIT_MS)).unref()),
      ]);
      if (!subscribed) acks.waitedInVain = true;
    }
    if (!subscribed) {
      // Without an ack channel, still tell every instance; only the wait is lost.
      await this.redis.publish(channel, JSON.stringify(msg));
      return false;
    }
    const ackId = randomUUID();
    // Registered before the publish (an acknowledgement may arrive before PUBLISH answers), and
    // dropped when it fails: a Redis outage otherwise left one wait per narrowing change for good.
    const wait = acks.expect(ackId);
    let receivers: number;
    try {
      receivers = await this.redis.publish(
        channel,
        JSON.stringify({ ...msg, ackId, ackTo: acks.channel } satisfies AuthInvalidationMessage),
      );
    } catch (err) {
      wait.cancel();
      throw err;
    }
    return wait.arm(receivers, timeoutMs);
  }

  /** Acknowledgement waits registered and not finished (0 without an acknowledgement subscriber). */
  get ackWaits(): number {
    return this.acks?.waiting ?? 0;
  }

  /**
   * Publishes a credential invalidation without waiting for acknowledgements: for the outbox relay,
   * which delivers the ones that could not be published when their change committed.
   */
  async announceAuthInvalidation(msg: AuthInvalidation): Promise<void> {
    await this.redis.publish(redisKey(this.config, PubSub.authInvalidate), JSON.stringify(msg));
  }

  /** Closes the acknowledgement subscriber, if one was opened. */
  close(): void {
    this.acks?.close();
    this.acks = undefined;
  }
}
