import type { ServerPush } from './events';
import { auditEventSchema } from './presenters/auditEvent';
import { gpsPointSchema } from './presenters/gpsPoint';
import { z, zChars } from './zod';

/**
 * The JSON messages of /v1/ws (spec §4.26, §6) as zod schemas: the AsyncAPI document
 * (api/routes/asyncapi.ts) and the first-party client (shared/client) are built from these, and
 * the compile-time check at the end keeps them equal to `ServerPush`, the type the server pushes.
 */

// ---- client → server ----
export const wsSubscribe = z.object({ type: z.literal('subscribe'), channel: zChars({ min: 1, max: 200 }) });
export const wsUnsubscribe = z.object({ type: z.literal('unsubscribe'), channel: zChars({ min: 1, max: 200 }) });
export const wsPing = z.object({ type: z.literal('ping') });
export const wsClientMessages = { subscribe: wsSubscribe, unsubscribe: wsUnsubscribe, ping: wsPing };
export type WsClientMessage = z.infer<typeof wsSubscribe | typeof wsUnsubscribe | typeof wsPing>;

// ---- server → client: replies ----
/**
 * The close frame of a draining process (docs/websocket.md, close codes): realtime sends it on its
 * own connections, a draining api on the ones it forwards, so a deploy reads the same either way.
 */
export const SERVICE_RESTART_CLOSE = { code: 1012, reason: 'service restart' } as const;
export const wsPong = z.object({ type: z.literal('pong') });
export const wsError = z.object({ type: z.literal('error'), message: z.string() });

// ---- server → client: pushes (ServerPush) ----
const ts = z.string().describe('ISO 8601');
const geofenceEventData = z.object({
  geofence_id: z.string(),
  geofence_name: z.string(),
  event: z.enum(['enter', 'exit']),
  device_id: z.string().nullable(),
  distance_km: z.number(),
  metadata: z.record(z.unknown()).nullable(),
});
export const wsPushes = {
  gpsUpdate: z.object({ type: z.literal('gpsUpdate'), data: gpsPointSchema }),
  vesselsUpdate: z.object({ type: z.literal('vesselsUpdate'), data: z.object({ vessels: z.array(z.unknown()) }) }),
  geofenceEvent: z.object({ type: z.literal('geofenceEvent'), data: geofenceEventData }),
  message: z.object({ type: z.literal('message'), channel: z.string(), data: z.string() }),
  accountDeleted: z.object({
    type: z.literal('accountDeleted'),
    userId: z.string(),
    reason: z.string(),
    timestamp: ts,
  }),
  accountBanned: z.object({
    type: z.literal('accountBanned'),
    userId: z.string(),
    reason: z.string().nullable(),
    expiresAt: ts.nullable(),
    isPermanent: z.boolean(),
    timestamp: ts,
  }),
  sessionRevoked: z.object({
    type: z.literal('sessionRevoked'),
    userId: z.string(),
    sessionId: z.string(),
    reason: z.string(),
    timestamp: ts,
  }),
  forceLogout: z.object({ type: z.literal('forceLogout'), userId: z.string(), reason: z.string(), timestamp: ts }),
  permissionsUpdated: z.object({
    type: z.literal('permissionsUpdated'),
    userId: z.string(),
    permissions: z.array(z.string()),
    timestamp: ts.optional(),
  }),
  rolesUpdated: z.object({
    type: z.literal('rolesUpdated'),
    userId: z.string(),
    roles: z.array(z.string()),
    roleIds: z.array(z.string()),
    timestamp: ts,
  }),
  rolePermissionsChanged: z.object({
    type: z.literal('rolePermissionsChanged'),
    roleId: z.string(),
    roleName: z.string(),
    timestamp: ts.optional(),
  }),
  oauthConsentRevoked: z.object({
    type: z.literal('oauthConsentRevoked'),
    userId: z.string(),
    clientId: z.string(),
    timestamp: ts,
  }),
  emailLinkVerified: z.object({
    type: z.literal('emailLinkVerified'),
    userId: z.string(),
    platformAccountId: z.string(),
    timestamp: ts,
  }),
  emailChangeVerified: z.object({
    type: z.literal('emailChangeVerified'),
    userId: z.string(),
    email: z.string(),
    timestamp: ts,
  }),
  auditEvent: z.object({ type: z.literal('auditEvent'), data: auditEventSchema }),
  chatUserLinked: z.object({
    type: z.literal('chatUserLinked'),
    chatId: z.string(),
    userId: z.string(),
    chatUsername: z.string(),
    avatarUrl: z.string().nullable(),
    timestamp: ts,
  }),
  chatUserUnlinked: z.object({
    type: z.literal('chatUserUnlinked'),
    chatId: z.string(),
    userId: z.string(),
    timestamp: ts,
  }),
  chatPermissionChanged: z.object({
    type: z.literal('chatPermissionChanged'),
    chatId: z.string(),
    userId: z.string(),
    permissions: z.array(z.string()),
    timestamp: ts,
  }),
  // To chat bots as an unsolicited ChatSettingsResponse (121) when the settings change.
  chatSettingsChanged: z.object({
    type: z.literal('chatSettingsChanged'),
    global: z.record(z.unknown()),
    guild: z
      .object({ guildId: z.string(), defaultLanguage: z.string().optional(), effectiveLanguage: z.string() })
      .optional(),
  }),
};

/** Every JSON message the server sends. */
export type WsServerMessage =
  z.infer<(typeof wsPushes)[keyof typeof wsPushes]> | z.infer<typeof wsPong> | z.infer<typeof wsError>;

// The schemas and the pushes the server sends are the same set: a push added to ServerPush
// without its schema here (or the other way round) fails the build.
type PushFromSchemas = z.infer<(typeof wsPushes)[keyof typeof wsPushes]>;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const pushesMatch: Same<PushFromSchemas, ServerPush> = true;
void pushesMatch;
