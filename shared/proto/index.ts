import fs from 'node:fs';
import path from 'node:path';
import protobuf from 'protobufjs';

/**
 * Loader for shared/proto/ws.proto. The .proto stays the single source of truth (no generated
 * code): it is parsed once per process with protobufjs reflection. `tsc` does not copy it into
 * dist/, so the file is looked up next to this module first and then in the source tree.
 */
function protoPath(): string {
  const candidates = [
    path.resolve(__dirname, 'ws.proto'),
    // dist/shared/proto/index.js → <repo>/shared/proto/ws.proto
    path.resolve(__dirname, '../../../shared/proto/ws.proto'),
  ];
  const found = candidates.find((p) => fs.existsSync(p));
  if (!found) throw new Error(`ws.proto not found (looked in ${candidates.join(', ')})`);
  return found;
}

/** Where ws.proto was found (the AsyncAPI document embeds it). */
export const PROTO_PATH = protoPath();
const protoRoot = protobuf.loadSync(PROTO_PATH);

const PKG = 'service.ws.v1';

/** A message type of the package, e.g. `protoType('CreateAuditEventRequest')`. */
export function protoType(name: string): protobuf.Type {
  return protoRoot.lookupType(`${PKG}.${name}`);
}

export const WsEnvelopeType = protoType('WsEnvelope');
export const WsMessageTypeEnum = protoRoot.lookupEnum(`${PKG}.WsMessageType`);

/** The oneof payload field names of WsEnvelope (camelCase, as protobufjs exposes them). */
export type PayloadCase =
  | 'ping'
  | 'pong'
  | 'subscribe'
  | 'unsubscribe'
  | 'error'
  | 'accountDeleted'
  | 'accountBanned'
  | 'sessionRevoked'
  | 'forceLogout'
  | 'oauthConsentRevoked'
  | 'rolesUpdated'
  | 'permissionsUpdated'
  | 'rolePermissionsChanged'
  | 'emailLinkVerified'
  | 'emailChangeVerified'
  | 'gpsUpdate'
  | 'chatUserLinked'
  | 'chatUserUnlinked'
  | 'chatPermissionChanged'
  | 'createAuditEvent'
  | 'createAuditEventResponse'
  | 'chatSyncRequest'
  | 'chatSyncResponse'
  | 'chatSettingsRequest'
  | 'chatSettingsResponse'
  | 'moderationRequest'
  | 'moderationResponse';

/** The WsMessageType name announcing each payload (the envelope's `type`). */
const TYPE_OF_PAYLOAD: Record<PayloadCase, string> = {
  ping: 'PING',
  pong: 'PONG',
  subscribe: 'SUBSCRIBE',
  unsubscribe: 'UNSUBSCRIBE',
  error: 'ERROR',
  accountDeleted: 'ACCOUNT_DELETED',
  accountBanned: 'ACCOUNT_BANNED',
  sessionRevoked: 'SESSION_REVOKED',
  forceLogout: 'FORCE_LOGOUT',
  oauthConsentRevoked: 'OAUTH_CONSENT_REVOKED',
  rolesUpdated: 'ROLES_UPDATED',
  permissionsUpdated: 'PERMISSIONS_UPDATED',
  rolePermissionsChanged: 'ROLE_PERMISSIONS_CHANGED',
  emailLinkVerified: 'EMAIL_LINK_VERIFIED',
  emailChangeVerified: 'EMAIL_CHANGE_VERIFIED',
  gpsUpdate: 'GPS_UPDATE',
  chatUserLinked: 'CHAT_USER_LINKED',
  chatUserUnlinked: 'CHAT_USER_UNLINKED',
  chatPermissionChanged: 'CHAT_PERMISSION_CHANGED',
  createAuditEvent: 'CREATE_AUDIT_EVENT',
  createAuditEventResponse: 'CREATE_AUDIT_EVENT_RESPONSE',
  chatSyncRequest: 'CHAT_SYNC_REQUEST',
  chatSyncResponse: 'CHAT_SYNC_RESPONSE',
  chatSettingsRequest: 'CHAT_SETTINGS_REQUEST',
  chatSettingsResponse: 'CHAT_SETTINGS_RESPONSE',
  moderationRequest: 'MODERATION_REQUEST',
  moderationResponse: 'MODERATION_RESPONSE',
};

const PAYLOAD_OF_TYPE = new Map<string, PayloadCase>(
  Object.entries(TYPE_OF_PAYLOAD).map(([k, v]) => [v, k as PayloadCase]),
);

/** A decoded envelope as a plain object: enums as names, int64 as numbers. */
export interface Envelope {
  type: string;
  requestId?: string;
  payload?: PayloadCase;
  [field: string]: unknown;
}

/** Builds and encodes an envelope around one payload; `type` follows from the payload. */
export function encodeEnvelope(payload: PayloadCase, body: Record<string, unknown>, requestId?: string): Uint8Array {
  const msg = WsEnvelopeType.fromObject({
    type: TYPE_OF_PAYLOAD[payload],
    ...(requestId ? { requestId } : {}),
    [payload]: body,
  });
  return WsEnvelopeType.encode(msg).finish();
}

/** Thrown for a string field whose bytes are not UTF-8. */
export class InvalidUtf8Error extends Error {
  constructor() {
    super('a string field is not valid UTF-8');
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * protobufjs' reader, except that a string field whose bytes are not UTF-8 is refused
 * (InvalidUtf8Error) rather than read with U+FFFD in place of what was sent: the rule of every
 * JSON and form body, which would otherwise not hold for the same request sent as protobuf.
 */
class StrictReader extends protobuf.Reader {
  override string(): string {
    try {
      return utf8.decode(this.bytes());
    } catch {
      throw new InvalidUtf8Error();
    }
  }
}

/**
 * Decodes one binary frame. Throws on malformed bytes. When the sender set only `type` (an empty
 * Ping, say), the payload case is inferred from it.
 */
export function decodeEnvelope(bytes: Uint8Array): Envelope {
  const msg = WsEnvelopeType.decode(new StrictReader(bytes));
  // `oneofs: false`: protobufjs would otherwise also emit the synthetic oneofs of proto3 optional
  // fields (`_guildId: 'guildId'`) in every nested message. The payload case comes from the
  // decoded message's oneof getter instead.
  const obj = WsEnvelopeType.toObject(msg, {
    enums: String,
    longs: Number,
    oneofs: false,
    defaults: false,
    arrays: true,
  }) as Envelope;
  const set = (msg as unknown as { payload?: PayloadCase }).payload;
  if (set) obj.payload = set;
  if (obj.type === undefined) obj.type = 'UNSPECIFIED';
  if (!obj.payload) {
    const inferred = PAYLOAD_OF_TYPE.get(obj.type);
    if (inferred) {
      obj.payload = inferred;
      obj[inferred] = {};
    }
  }
  return obj;
}
