import { OpenApiGeneratorV31, OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import { readFileSync } from 'node:fs';
import type { ZodTypeAny } from 'zod';
import { PROTO_PATH } from '../shared/proto';
import { wsClientMessages, wsError, wsPong, wsPushes } from '../shared/wsMessages';

/**
 * The AsyncAPI 3.0 document of /v1/ws (spec §4.26, §6), built from the zod schemas the pushes are
 * typed with (shared/wsMessages.ts) and the protobuf schema of the binary frames (ws.proto).
 */

/** Channels clients subscribe to, with who may (shared/policies.ts decides; this says it in words). */
const CHANNELS: Record<string, { address: string; description: string; messages: string[]; params?: string[] }> = {
  user: {
    address: 'user:{userId}',
    params: ['userId'],
    description:
      'Only that user (API keys cannot). A user connection is subscribed to its own channel automatically. ' +
      'Account events: the socket is closed after accountDeleted, accountBanned and forceLogout. ' +
      'emailChangeVerified and emailLinkVerified reach a connection of an OAuth token only when its grant names account:email.',
    messages: [
      'accountDeleted',
      'accountBanned',
      'sessionRevoked',
      'forceLogout',
      'permissionsUpdated',
      'rolesUpdated',
      'rolePermissionsChanged',
      'oauthConsentRevoked',
      'emailLinkVerified',
      'emailChangeVerified',
    ],
  },
  admin: {
    address: 'admin:{topic}',
    params: ['topic'],
    description: 'admin:read permission or super admin. admin:audit carries every new audit event.',
    messages: ['auditEvent'],
  },
  public: {
    address: 'public:{topic}',
    params: ['topic'],
    description: 'Any client, anonymous included (also the bare channel `public`).',
    messages: ['message'],
  },
  gps: {
    address: 'gps:{topic}',
    params: ['topic'],
    description: 'gps:read permission (also the bare channel `gps`). Pushes carry no channel field.',
    messages: ['gpsUpdate'],
  },
  geofence: {
    address: 'geofence:{topic}',
    params: ['topic'],
    description: 'geofences:read permission (also the bare channel `geofence`).',
    messages: ['geofenceEvent'],
  },
  vessels: {
    address: 'vessels',
    description: 'AIS vessel positions; anyone, anonymous included.',
    messages: ['vesselsUpdate'],
  },
  chatBots: {
    address: 'bots:chat',
    description: 'Internal: chat bot connections are subscribed by the server; clients can neither join nor leave.',
    messages: ['chatUserLinked', 'chatUserUnlinked', 'chatPermissionChanged'],
  },
};

const SOCKET_DESCRIPTION =
  'The socket itself. Text frames are JSON messages with a `type`; binary frames are protobuf WsEnvelope ' +
  'messages (ws.proto); replies follow the format of the client’s latest frame. Subscribing answers a `message` ' +
  "whose data is 'Subscribed to <channel>', or an `error` (e.g. access denied to channel). The server sends a " +
  'protocol-level Ping every 5 s and closes the connection when no Pong arrives within 10 s.';

let cached: Record<string, unknown> | undefined;

function protoText(): string {
  return readFileSync(PROTO_PATH, 'utf8');
}

export function asyncApiDocument(version: string): Record<string, unknown> {
  if (cached) return cached;
  const registry = new OpenAPIRegistry();
  const all: Record<string, ZodTypeAny> = { ...wsClientMessages, pong: wsPong, error: wsError, ...wsPushes };
  for (const [name, schema] of Object.entries(all)) registry.register(`${name}Payload`, schema);
  const generated = new OpenApiGeneratorV31(registry.definitions).generateComponents() as {
    components?: { schemas?: Record<string, unknown> };
  };
  const messages: Record<string, unknown> = {};
  for (const name of Object.keys(all))
    messages[name] = {
      name,
      contentType: 'application/json',
      payload: { $ref: `#/components/schemas/${name}Payload` },
    };
  messages.protobufEnvelope = {
    name: 'WsEnvelope',
    title: 'Protobuf envelope (binary frame)',
    contentType: 'application/x-protobuf',
    description: 'Any binary frame, both directions: a WsEnvelope of ws.proto (payload oneof, request_id).',
    payload: { schemaFormat: 'application/vnd.google.protobuf;version=3', schema: protoText() },
  };
  const ref = (m: string) => ({ $ref: `#/components/messages/${m}` });
  const channels: Record<string, unknown> = {
    socket: {
      address: '/v1/ws',
      description: SOCKET_DESCRIPTION,
      messages: Object.fromEntries(
        ['subscribe', 'unsubscribe', 'ping', 'pong', 'message', 'error', 'protobufEnvelope'].map((m) => [m, ref(m)]),
      ),
    },
  };
  for (const [name, c] of Object.entries(CHANNELS))
    channels[name] = {
      address: c.address,
      description: `Access: ${c.description}`,
      ...(c.params
        ? { parameters: Object.fromEntries(c.params.map((p) => [p, { description: `The ${p} part of the name` }])) }
        : {}),
      messages: Object.fromEntries(c.messages.map((m) => [m, ref(m)])),
    };
  const operations: Record<string, unknown> = {};
  for (const m of ['subscribe', 'unsubscribe', 'ping'])
    operations[`send_${m}`] = {
      action: 'send',
      channel: { $ref: '#/channels/socket' },
      messages: [{ $ref: `#/channels/socket/messages/${m}` }],
    };
  operations.send_protobuf = {
    action: 'send',
    channel: { $ref: '#/channels/socket' },
    messages: [{ $ref: '#/channels/socket/messages/protobufEnvelope' }],
  };
  for (const m of ['pong', 'message', 'error', 'protobufEnvelope'])
    operations[`receive_${m}`] = {
      action: 'receive',
      channel: { $ref: '#/channels/socket' },
      messages: [{ $ref: `#/channels/socket/messages/${m}` }],
    };
  for (const [name, c] of Object.entries(CHANNELS))
    operations[`receive_${name}`] = {
      action: 'receive',
      channel: { $ref: `#/channels/${name}` },
      messages: c.messages.map((m) => ({ $ref: `#/channels/${name}/messages/${m}` })),
    };
  cached = {
    asyncapi: '3.0.0',
    info: {
      title: 'Service WebSocket API',
      version,
      description: 'Real-time pushes and requests over /v1/ws. The REST API is described at /v1/openapi.json.',
    },
    defaultContentType: 'application/json',
    servers: {
      api: {
        host: 'localhost',
        protocol: 'ws',
        pathname: '/v1/ws',
        description: 'The api’s own origin (wss:// behind TLS).',
        security: [{ $ref: '#/components/securitySchemes/ticket' }, { $ref: '#/components/securitySchemes/bearer' }],
      },
    },
    channels,
    operations,
    components: {
      schemas: generated.components?.schemas ?? {},
      messages,
      securitySchemes: {
        ticket: {
          type: 'httpApiKey',
          name: 'Sec-WebSocket-Protocol',
          in: 'header',
          description: "Subprotocols ['service-ticket', <ticket>] with a ticket from POST /v1/ws/ticket (single use).",
        },
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'Authorization header (non-browser clients; API keys allowed). No credential: anonymous.',
        },
      },
    },
  };
  return cached;
}
