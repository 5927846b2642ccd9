import test from 'ava';
import { WsEnvelopeType, WsMessageTypeEnum, protoType } from '../../shared/proto';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { connect, publish, wire, wsBase } from '../helpers/wsClient';

/** Signed-in users here read tracking data: the default User role alone is self-service only. */
const READER = ['role_user', 'role_api_read_only'];

const stack = useStack(test, { realtime: 1 });

const one = (m: Map<number, Array<number | Buffer>>, f: number) => m.get(f)?.[0];
const text = (m: Map<number, Array<number | Buffer>>, f: number) => (one(m, f) as Buffer | undefined)?.toString('utf8');

test('ws.proto carries exactly the spec field numbers and WsMessageType values', (t) => {
  const fields = Object.fromEntries(Object.values(WsEnvelopeType.fields).map((f) => [f.name, f.id]));
  t.like(fields, {
    type: 1,
    ping: 10,
    pong: 11,
    subscribe: 20,
    unsubscribe: 21,
    error: 30,
    accountDeleted: 40,
    accountBanned: 41,
    sessionRevoked: 42,
    forceLogout: 43,
    oauthConsentRevoked: 44,
    rolesUpdated: 50,
    permissionsUpdated: 51,
    rolePermissionsChanged: 52,
    emailLinkVerified: 60,
    emailChangeVerified: 61,
    gpsUpdate: 70,
    chatUserLinked: 80,
    chatUserUnlinked: 81,
    chatPermissionChanged: 82,
    createAuditEvent: 100,
    createAuditEventResponse: 101,
    chatSyncRequest: 110,
    chatSyncResponse: 111,
    chatSettingsRequest: 120,
    chatSettingsResponse: 121,
    moderationRequest: 140,
    moderationResponse: 141,
  });
  t.like(WsMessageTypeEnum.values, {
    UNSPECIFIED: 0,
    PING: 1,
    PONG: 2,
    SUBSCRIBE: 10,
    UNSUBSCRIBE: 11,
    ERROR: 20,
    ACCOUNT_DELETED: 30,
    ACCOUNT_BANNED: 31,
    SESSION_REVOKED: 32,
    FORCE_LOGOUT: 33,
    OAUTH_CONSENT_REVOKED: 34,
    ROLES_UPDATED: 40,
    PERMISSIONS_UPDATED: 41,
    ROLE_PERMISSIONS_CHANGED: 42,
    EMAIL_LINK_VERIFIED: 50,
    EMAIL_CHANGE_VERIFIED: 51,
    GPS_UPDATE: 60,
    CHAT_USER_LINKED: 70,
    CHAT_USER_UNLINKED: 71,
    CHAT_PERMISSION_CHANGED: 72,
  });
  // Every payload sits in the one `payload` oneof.
  t.is(WsEnvelopeType.oneofs.payload.fieldsArray.length, 27);
  // The spec's audit request fields, with optional presence where the spec says optional.
  const audit = protoType('CreateAuditEventRequest');
  t.deepEqual(Object.keys(audit.fields).sort(), [
    'actorId',
    'description',
    'errorMessage',
    'eventType',
    'ipAddress',
    'metadataJson',
    'resourceId',
    'resourceType',
    'sourceService',
    'status',
    'userAgent',
    'userId',
  ]);
  for (const f of [
    'resourceType',
    'resourceId',
    'actorId',
    'ipAddress',
    'userAgent',
    'description',
    'metadataJson',
    'errorMessage',
  ])
    t.is(audit.fields[f].partOf?.name, `_${f}`, f);
  const resp = protoType('CreateAuditEventResponse');
  t.deepEqual(Object.fromEntries(Object.values(resp.fields).map((f) => [f.name, [f.id, f.type]])), {
    success: [1, 'bool'],
    auditEventId: [2, 'string'],
    error: [3, 'string'],
  });
  // Spec §6 protobuf event shapes.
  const names = (n: string) => Object.keys(protoType(n).fields).sort();
  t.deepEqual(names('ChatUserLinked'), ['avatarUrl', 'chatId', 'chatUsername', 'timestamp', 'userId']);
  t.deepEqual(names('ChatUserUnlinked'), ['chatId', 'timestamp', 'userId']);
  t.deepEqual(names('ChatPermissionChanged'), ['chatId', 'permissions', 'timestamp', 'userId']);
  t.deepEqual(names('AccountDeleted'), ['reason', 'timestamp', 'userId']);
  t.deepEqual(names('AccountBanned'), ['expiresAt', 'isPermanent', 'reason', 'timestamp', 'userId']);
  t.deepEqual(names('PermissionsUpdated'), ['permissions', 'timestamp', 'userId']);
  t.deepEqual(names('RolesUpdated'), ['roleIds', 'roles', 'timestamp', 'userId']);
  t.deepEqual(names('GpsUpdate'), ['altitude', 'heading', 'latitude', 'longitude', 'speed', 'timestamp', 'trackerId']);
});

test('hand-encoded protobuf ping gets the byte-exact pong; JSON ping still gets JSON', async (t) => {
  const s = stack();
  const conn = await connect(wsBase(s, 0));
  // WsEnvelope{type=PING(1), ping(10)={timestamp(1)=1234}}
  conn.ws.send(Buffer.from([0x08, 0x01, 0x52, 0x03, 0x08, 0xd2, 0x09]));
  const f = await conn.next((x) => x.kind === 'binary');
  // WsEnvelope{type=PONG(2), pong(11)={timestamp(1)=1234}}
  t.deepEqual([...(f as any).raw], [0x08, 0x02, 0x5a, 0x03, 0x08, 0xd2, 0x09]);
  // An empty ping (type only) is understood too; the pong then carries the server clock.
  conn.ws.send(Buffer.from([0x08, 0x01]));
  const g = await conn.nextEnvelope();
  t.is(g.type, 'PONG');
  t.true(Math.abs((g.pong as any).timestamp - Date.now()) < 5000);
  conn.json({ type: 'ping' });
  t.deepEqual(await conn.nextJson(), { type: 'pong' });
  conn.close();
});

test('protobuf subscribe/unsubscribe: confirmations and errors as envelopes, request_id echoed', async (t) => {
  const s = stack();
  const conn = await connect(wsBase(s, 0));
  // WsEnvelope{type=SUBSCRIBE(10), request_id(2)="r1", subscribe(20)={channel(1)="public"}}
  const body = Buffer.from([0x0a, 0x06, ...Buffer.from('public')]);
  conn.ws.send(Buffer.from([0x08, 0x0a, 0x12, 0x02, 0x72, 0x31, 0xa2, 0x01, body.length, ...body]));
  const f = (await conn.next((x) => x.kind === 'binary')) as any;
  const w = wire(f.raw);
  t.is(one(w, 1), 10);
  t.is(text(w, 2), 'r1');
  t.is(text(wire(one(w, 20) as Buffer), 1), 'public');

  conn.envelope('subscribe', { channel: 'gps' }, 'r2');
  const err = (await conn.next((x) => x.kind === 'binary')) as any;
  const e = wire(err.raw);
  t.is(one(e, 1), 20); // ERROR
  t.is(text(e, 2), 'r2');
  const inner = wire(one(e, 30) as Buffer);
  t.is(text(inner, 1), 'access denied to channel gps');
  t.is(text(inner, 2), 'forbidden');

  conn.envelope('unsubscribe', { channel: 'public' }, 'r3');
  const u = await conn.nextEnvelope();
  t.is(u.type, 'UNSUBSCRIBE');
  t.deepEqual(u.unsubscribe, { channel: 'public' });
  t.is(u.requestId, 'r3');

  // A name no channel has: the error subscribe answers, its echo capped, for unsubscribe too.
  for (const [i, channel] of ['\u0000x', 'evil\r\n', 'bad channel!', '\u202E'.repeat(20_000)].entries()) {
    conn.envelope('subscribe', { channel }, `s${i}`);
    const subscribed = await conn.nextEnvelope();
    conn.envelope('unsubscribe', { channel }, `u${i}`);
    const f = (await conn.next((x) => x.kind === 'binary')) as { env: any; raw: Buffer };
    t.is(subscribed.type, 'ERROR');
    t.is(f.env.type, 'ERROR');
    t.is(f.env.requestId, `u${i}`);
    t.deepEqual(f.env.error, subscribed.error);
    t.regex(f.env.error.message, /^invalid channel name: /);
    t.is(f.env.error.code, 'unknown_channel');
    t.true(f.raw.length < 700, `${f.raw.length} bytes`);
  }
  conn.close();
});

test('a protobuf client gets account events as protobuf; a JSON socket of the same user gets JSON; data broadcasts stay JSON', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const pb = await connect(wsBase(s, 0), { token: user.token });
  const js = await connect(wsBase(s, 0), { token: user.token });
  pb.envelope('subscribe', { channel: 'gps' });
  await pb.nextEnvelope((e) => e.type === 'SUBSCRIBE');
  await js.subscribe('gps');

  const ts = '2026-03-04T05:06:07.000Z';
  const events: Array<[any, string, number, number, (m: Map<number, Array<number | Buffer>>) => void]> = [
    [
      { type: 'oauthConsentRevoked', userId: user.id, clientId: 'client-1', timestamp: ts },
      'OAUTH_CONSENT_REVOKED',
      34,
      44,
      (m) => {
        t.is(text(m, 1), user.id);
        t.is(text(m, 2), 'client-1');
        t.is(text(m, 3), ts);
      },
    ],
    [
      {
        type: 'rolesUpdated',
        userId: user.id,
        roles: ['User', 'Developer'],
        roleIds: ['role_user', 'role_developer'],
        timestamp: ts,
      },
      'ROLES_UPDATED',
      40,
      50,
      (m) => {
        t.deepEqual(m.get(2)!.map(String), ['User', 'Developer']);
        t.deepEqual(m.get(3)!.map(String), ['role_user', 'role_developer']);
        t.is(text(m, 4), ts);
      },
    ],
    [
      { type: 'permissionsUpdated', userId: user.id, permissions: ['gps:read', 'two_factor:read'], timestamp: ts },
      'PERMISSIONS_UPDATED',
      41,
      51,
      (m) => {
        t.is(text(m, 1), user.id);
        t.deepEqual(m.get(2)!.map(String), ['gps:read', 'two_factor:read']);
        t.is(text(m, 3), ts);
      },
    ],
    [
      { type: 'rolePermissionsChanged', roleId: 'role_x', roleName: 'X', timestamp: ts },
      'ROLE_PERMISSIONS_CHANGED',
      42,
      52,
      (m) => {
        t.is(text(m, 1), 'role_x');
        t.is(text(m, 2), 'X');
        t.is(text(m, 3), ts);
      },
    ],
    [
      { type: 'emailLinkVerified', userId: user.id, platformAccountId: 'pa-1', timestamp: ts },
      'EMAIL_LINK_VERIFIED',
      50,
      60,
      (m) => {
        t.is(text(m, 2), 'pa-1');
      },
    ],
    [
      { type: 'emailChangeVerified', userId: user.id, email: 'e@example.test', timestamp: ts },
      'EMAIL_CHANGE_VERIFIED',
      51,
      61,
      (m) => {
        t.is(text(m, 2), 'e@example.test');
      },
    ],
    [
      { type: 'sessionRevoked', userId: user.id, sessionId: 'another-session', reason: 'revoked', timestamp: ts },
      'SESSION_REVOKED',
      32,
      42,
      (m) => {
        t.is(text(m, 1), user.id);
        t.is(text(m, 2), 'another-session');
        t.is(text(m, 3), 'revoked');
        t.is(text(m, 4), ts);
      },
    ],
    [
      { type: 'accountBanned', userId: user.id, reason: 'spam', expiresAt: null, isPermanent: true, timestamp: ts },
      'ACCOUNT_BANNED',
      31,
      41,
      (m) => {
        t.is(text(m, 1), user.id);
        t.is(text(m, 2), 'spam');
        t.false(m.has(3));
        t.is(one(m, 4), 1);
        t.is(text(m, 5), ts);
      },
    ],
  ];
  // A gpsUpdate in the middle: JSON for both.
  await publish(s, 'gps', { type: 'gpsUpdate', data: { id: 'g1' } });
  t.deepEqual(await pb.nextJson((m) => m.type === 'gpsUpdate'), { type: 'gpsUpdate', data: { id: 'g1' } });
  t.deepEqual(await js.nextJson((m) => m.type === 'gpsUpdate'), { type: 'gpsUpdate', data: { id: 'g1' } });

  for (const [json, typeName, typeNo, fieldNo, check] of events) {
    await publish(s, `user:${user.id}`, json);
    const f = (await pb.next((x) => x.kind === 'binary')) as any;
    const w = wire(f.raw);
    t.is(one(w, 1), typeNo, typeName);
    t.is(f.env.type, typeName);
    t.true(w.has(fieldNo), typeName);
    check(wire(one(w, fieldNo) as Buffer));
    t.deepEqual(await js.nextJson((m) => m.type === json.type), json);
  }
  // The ban closes both sockets after delivering the event.
  t.is((await pb.closed).code, 4003);
  t.is((await js.closed).code, 4003);
});

test('chat bot connections receive the protobuf-only bot events; other clients never see them', async (t) => {
  const s = stack();
  const bot = await connect(wsBase(s, 0), { token: s.systemKey, headers: { 'x-source-service': 'chat_bot' } });
  const user = await createUser(s.db, { roles: ['role_admin'] });
  const admin = await connect(wsBase(s, 0), { token: user.token });
  const ts = '2026-03-04T05:06:07.000Z';
  await publish(s, 'bots:chat', {
    type: 'chatUserLinked',
    chatId: '1234567890',
    userId: user.id,
    chatUsername: 'captain',
    avatarUrl: null,
    timestamp: ts,
  });
  const f = (await bot.next()) as any;
  t.is(f.kind, 'binary');
  const w = wire(f.raw);
  t.is(one(w, 1), 70);
  const m = wire(one(w, 80) as Buffer);
  t.is(text(m, 1), '1234567890');
  t.is(text(m, 2), user.id);
  t.is(text(m, 3), 'captain');
  t.false(m.has(4));
  t.is(text(m, 5), ts);

  await publish(s, 'bots:chat', { type: 'chatUserUnlinked', chatId: '1', userId: user.id, timestamp: ts });
  t.deepEqual((await bot.nextEnvelope()).chatUserUnlinked, { chatId: '1', userId: user.id, timestamp: ts });
  await publish(s, 'bots:chat', {
    type: 'chatPermissionChanged',
    chatId: '1',
    userId: user.id,
    permissions: ['chat:read'],
    timestamp: ts,
  });
  const p = await bot.nextEnvelope();
  t.is(p.type, 'CHAT_PERMISSION_CHANGED');
  t.deepEqual(p.chatPermissionChanged, { chatId: '1', userId: user.id, permissions: ['chat:read'], timestamp: ts });
  t.true(await admin.nothing());
  bot.close();
  admin.close();
});

test('protobuf protocol errors: garbage bytes, server-only messages, GpsUpdate from a client', async (t) => {
  const s = stack();
  const conn = await connect(wsBase(s, 0));
  conn.ws.send(Buffer.from([0xff, 0xff, 0xff]));
  t.deepEqual((await conn.nextEnvelope()).error, { message: 'invalid protobuf WsEnvelope', code: 'bad_request' });
  conn.envelope('accountDeleted', { userId: 'x' }, 'q1');
  const e = await conn.nextEnvelope();
  t.is(e.requestId, 'q1');
  t.deepEqual(e.error, { message: 'accountDeleted is not a client message', code: 'bad_request' });
  conn.envelope('gpsUpdate', { trackerId: 't', latitude: 1, longitude: 2, timestamp: 1700000000 });
  t.regex(((await conn.nextEnvelope()).error as any).message, /GpsUpdate is not accepted/);
  // Anonymous clients may not send requests.
  conn.envelope('createAuditEvent', { eventType: 'login' }, 'q2');
  const denied = await conn.nextEnvelope();
  t.is(denied.requestId, 'q2');
  t.deepEqual(denied.error, { message: 'missing permission audit:write', code: 'forbidden' });
  conn.close();
});
