import { encodeEnvelope, PayloadCase } from '../shared/proto';
import { SERVICE_RESTART_CLOSE } from '../shared/wsMessages';

/**
 * Frame formats of /v1/ws. Text frames are JSON, binary frames one protobuf WsEnvelope. Pushes
 * arrive from Redis as the exact JSON text frame; the protobuf twin of an account, permission or
 * bot event is derived from that JSON here, at most once per published message.
 */

export type FrameFormat = 'json' | 'protobuf';

const TYPE_PREFIX = '{"type":"';

/**
 * The `type` of a pre-serialised push without parsing it: EventBus serialises the push object
 * literal, whose first key is `type`. Returns null for anything else (then the payload is relayed
 * untouched as JSON).
 */
export function peekType(payload: Buffer): string | null {
  if (payload.length < TYPE_PREFIX.length + 2 || payload[0] !== 0x7b /* { */) return null;
  if (payload.toString('latin1', 0, TYPE_PREFIX.length) !== TYPE_PREFIX) return null;
  const end = payload.indexOf(0x22 /* " */, TYPE_PREFIX.length);
  if (end < 0 || end - TYPE_PREFIX.length > 40) return null;
  return payload.toString('latin1', TYPE_PREFIX.length, end);
}

/** The `type` of a JSON push by parsing it: the fallback when `type` is not its first key. */
export function parseType(payload: Buffer): string | null {
  try {
    const m = JSON.parse(payload.toString('utf8'));
    return m && typeof m.type === 'string' ? m.type : null;
  } catch {
    return null;
  }
}

type Json = Record<string, any>;
const str = (v: unknown): string => (v === null || v === undefined ? '' : String(v));
const opt = (v: unknown): string | undefined => (v === null || v === undefined ? undefined : String(v));
const arr = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : []);
const ts = (v: unknown): string => (v ? String(v) : new Date().toISOString());

/** JSON push type → its protobuf payload (spec §6 protobuf events, decisions.md JSON twins). */
const TO_PROTO: Record<string, (m: Json) => [PayloadCase, Json]> = {
  accountDeleted: (m) => [
    'accountDeleted',
    { userId: str(m.userId), reason: opt(m.reason), timestamp: ts(m.timestamp) },
  ],
  accountBanned: (m) => [
    'accountBanned',
    {
      userId: str(m.userId),
      reason: opt(m.reason),
      expiresAt: opt(m.expiresAt),
      isPermanent: !!m.isPermanent,
      timestamp: ts(m.timestamp),
    },
  ],
  sessionRevoked: (m) => [
    'sessionRevoked',
    { userId: str(m.userId), sessionId: str(m.sessionId), reason: str(m.reason), timestamp: ts(m.timestamp) },
  ],
  forceLogout: (m) => ['forceLogout', { userId: str(m.userId), reason: str(m.reason), timestamp: ts(m.timestamp) }],
  oauthConsentRevoked: (m) => [
    'oauthConsentRevoked',
    { userId: str(m.userId), clientId: str(m.clientId), timestamp: ts(m.timestamp) },
  ],
  rolesUpdated: (m) => [
    'rolesUpdated',
    { userId: str(m.userId), roles: arr(m.roles), roleIds: arr(m.roleIds), timestamp: ts(m.timestamp) },
  ],
  permissionsUpdated: (m) => [
    'permissionsUpdated',
    { userId: str(m.userId), permissions: arr(m.permissions), timestamp: ts(m.timestamp) },
  ],
  rolePermissionsChanged: (m) => [
    'rolePermissionsChanged',
    { roleId: str(m.roleId), roleName: str(m.roleName), timestamp: ts(m.timestamp) },
  ],
  emailLinkVerified: (m) => [
    'emailLinkVerified',
    { userId: str(m.userId), platformAccountId: str(m.platformAccountId), timestamp: ts(m.timestamp) },
  ],
  emailChangeVerified: (m) => [
    'emailChangeVerified',
    { userId: str(m.userId), email: str(m.email), timestamp: ts(m.timestamp) },
  ],
  chatUserLinked: (m) => [
    'chatUserLinked',
    {
      chatId: str(m.chatId),
      userId: str(m.userId),
      chatUsername: str(m.chatUsername),
      avatarUrl: opt(m.avatarUrl),
      timestamp: ts(m.timestamp),
    },
  ],
  chatUserUnlinked: (m) => [
    'chatUserUnlinked',
    { chatId: str(m.chatId), userId: str(m.userId), timestamp: ts(m.timestamp) },
  ],
  chatPermissionChanged: (m) => [
    'chatPermissionChanged',
    { chatId: str(m.chatId), userId: str(m.userId), permissions: arr(m.permissions), timestamp: ts(m.timestamp) },
  ],
  chatSettingsChanged: (m) => [
    'chatSettingsResponse',
    { success: true, global: m.global ?? {}, ...(m.guild ? { guild: m.guild } : {}) },
  ],
};

/** Push types that have a protobuf twin (sent as protobuf to clients speaking protobuf). */
export function hasProtobufTwin(type: string | null): boolean {
  return type !== null && Object.prototype.hasOwnProperty.call(TO_PROTO, type);
}

/** Bot events exist only as protobuf (spec §6): never sent as JSON. */
export const PROTOBUF_ONLY_TYPES: ReadonlySet<string> = new Set([
  'chatUserLinked',
  'chatUserUnlinked',
  'chatPermissionChanged',
  'chatSettingsChanged',
]);

/** Encodes the protobuf twin of a JSON push; null when the JSON is not a known push. */
export function protobufTwin(payload: Buffer | string): Uint8Array | null {
  let msg: Json;
  try {
    msg = JSON.parse(typeof payload === 'string' ? payload : payload.toString('utf8'));
  } catch {
    return null;
  }
  const conv = msg && typeof msg.type === 'string' ? TO_PROTO[msg.type] : undefined;
  if (!conv) return null;
  const [payloadCase, body] = conv(msg);
  return encodeEnvelope(payloadCase, body);
}

/** Close codes the realtime process uses (4000-4999 are application codes). */
export const CloseCode = {
  /** RFC 6455: message violating policy (here: too many messages). */
  policyViolation: 1008,
  /** RFC 6455 "try again later": the client did not read fast enough and its send buffer overflowed. */
  slowConsumer: 1013,
  /** RFC 6455 "service restart": the instance is draining (deploy, reload); reconnect, to another instance or this one restarted. */
  serviceRestart: SERVICE_RESTART_CLOSE.code,
  /** Credentials revoked, expired or no longer valid. */
  credentialsRevoked: 4001,
  accountDeleted: 4002,
  accountBanned: 4003,
  sessionRevoked: 4004,
  forceLogout: 4005,
  oauthConsentRevoked: 4006,
} as const;
