import type Redis from 'ioredis';
import type { Config } from './config';
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
  /** Replies to requests a realtime instance forwarded to a worker (bot/service protobuf requests). */
  rpcReply: (instanceId: string) => `rpc:reply:${instanceId}`,
  /** Requests for a chat bot connected to realtime instance `instanceId` (chat sync, moderation). */
  botRequest: (instanceId: string) => `rpc:bot:${instanceId}`,
} as const;

/** Redis hash where realtime instances report their connection and subscription counts. */
export const WS_STATS_KEY = 'ws:stats';

/**
 * Internal WebSocket channel of chat bot connections: publish chatUserLinked, chatUserUnlinked and
 * chatPermissionChanged here; bots receive them as protobuf (clients cannot subscribe to it).
 */
export const CHAT_BOTS_WS_CHANNEL = 'bots:chat';

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
  | { type: 'accountBanned'; userId: string; reason: string | null; expiresAt: string | null; isPermanent: boolean; timestamp: string }
  | { type: 'sessionRevoked'; userId: string; sessionId: string; reason: string; timestamp: string }
  | { type: 'forceLogout'; userId: string; reason: string; timestamp: string }
  | { type: 'permissionsUpdated'; userId: string; permissions: string[]; timestamp?: string }
  | { type: 'rolesUpdated'; userId: string; roles: string[]; roleIds: string[]; timestamp: string }
  | { type: 'rolePermissionsChanged'; roleId: string; roleName: string; timestamp?: string }
  | { type: 'oauthConsentRevoked'; userId: string; clientId: string; timestamp: string }
  | { type: 'emailLinkVerified'; userId: string; platformAccountId: string; timestamp: string }
  | { type: 'emailChangeVerified'; userId: string; email: string; timestamp: string }
  // Protobuf-only bot events (spec §6), published on CHAT_BOTS_WS_CHANNEL.
  | { type: 'chatUserLinked'; chatId: string; userId: string; chatUsername: string; avatarUrl: string | null; timestamp: string }
  | { type: 'chatUserUnlinked'; chatId: string; userId: string; timestamp: string }
  | { type: 'chatPermissionChanged'; chatId: string; userId: string; permissions: string[]; timestamp: string };

export interface AuthInvalidation {
  userId?: string;
  apiKeyId?: string;
  /** Drop every cached credential (role permission changes). */
  all?: boolean;
}

/** ARGV: channel, message, channel, message… (channels are not keys, so they go in ARGV). */
const PUBLISH_MANY_SCRIPT = `for i = 1, #ARGV, 2 do redis.call('PUBLISH', ARGV[i], ARGV[i + 1]) end
return #ARGV / 2`;

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
   * Publishes many pushes, in order, as one Redis command (a script calling PUBLISH for each), e.g.
   * every point of a GPS batch: one command instead of hundreds for both client and server.
   */
  async publishMany(items: Array<{ channel: string; message: ServerPush }>): Promise<void> {
    if (items.length === 0) return;
    // A push sent on several channels (gps and gps:<device>) is serialised once.
    const texts = new Map<ServerPush, string>();
    const args: string[] = [];
    for (const { channel, message } of items) {
      let text = texts.get(message);
      if (text === undefined) texts.set(message, (text = JSON.stringify(message)));
      args.push(redisKey(this.config, PubSub.ws(channel)), text);
    }
    const redis = this.redis as Redis & { publishMany?: (...args: string[]) => Promise<number> };
    if (!redis.publishMany) redis.defineCommand('publishMany', { numberOfKeys: 0, lua: PUBLISH_MANY_SCRIPT });
    await redis.publishMany!(...args);
  }

  /** Shortcut for pushes on `user:{id}`. */
  async publishToUser(userId: string, message: ServerPush): Promise<void> {
    await this.publish(`user:${userId}`, message);
  }

  async invalidateAuth(msg: AuthInvalidation): Promise<void> {
    await this.redis.publish(redisKey(this.config, PubSub.authInvalidate), JSON.stringify(msg));
  }
}
