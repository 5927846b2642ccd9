import test from 'ava';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createSession } from '../../shared/commands/sessions';
import { randomToken, sha256 } from '../../shared/crypto';
import { CredentialResolver } from '../../shared/auth/credentials';
import { createKey, createOAuthToken, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { connect, publish, refusedUpgrade, wsBase } from '../helpers/wsClient';
import { passwordResetToken } from '../helpers/accounts';

/** Signed-in users here read tracking data: the default User role alone is self-service only. */
const READER = ['role_user', 'role_api_read_only'];

const stack = useStack(test, { realtime: 1 });
const now = () => new Date().toISOString();

async function ticket(token: string): Promise<string> {
  const r = await stack().request('POST', '/v1/ws/ticket', { token });
  return r.body.ticket;
}

test("accountDeleted: every socket of the user gets the event, then all of them (and the user's API keys) are closed", async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const bystander = await createUser(s.db, { roles: READER });
  const byBearer = await connect(wsBase(s, 0), { token: user.token });
  const byTicket = await connect(wsBase(s, 0), { protocols: ['service-ticket', await ticket(user.token)] });
  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  const byKey = await connect(wsBase(s, 0), { token: key.key });
  const other = await connect(wsBase(s, 0), { token: bystander.token });

  const event = { type: 'accountDeleted', userId: user.id, reason: 'user_request', timestamp: now() };
  await publish(s, `user:${user.id}`, event);
  t.deepEqual(await byBearer.nextJson(), event);
  t.deepEqual(await byTicket.nextJson(), event);
  t.deepEqual(await byBearer.closed, { code: 4002, reason: 'account deleted' });
  t.is((await byTicket.closed).code, 4002);
  t.is((await byKey.closed).code, 4002);
  t.is(other.ws.readyState, other.ws.OPEN);
  other.close();
});

test('accountBanned and forceLogout close the user sockets after delivery; forceLogout spares API keys', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  const a = await connect(wsBase(s, 0), { token: user.token });
  const k = await connect(wsBase(s, 0), { token: key.key });
  const logout = { type: 'forceLogout', userId: user.id, reason: 'password_changed', timestamp: now() };
  await publish(s, `user:${user.id}`, logout);
  t.deepEqual(await a.nextJson(), logout);
  t.is((await a.closed).code, 4005);
  t.true(await k.nothing(() => true, 200));
  t.is(k.ws.readyState, k.ws.OPEN);

  const b = await connect(wsBase(s, 0), { token: user.token });
  const ban = {
    type: 'accountBanned',
    userId: user.id,
    reason: 'abuse',
    expiresAt: null,
    isPermanent: true,
    timestamp: now(),
  };
  await publish(s, `user:${user.id}`, ban);
  t.deepEqual(await b.nextJson(), ban);
  t.is((await b.closed).code, 4003);
  t.is((await k.closed).code, 4003);
});

test('sessionRevoked closes only the sockets of that session', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const second = await createSession(stack().db, user.id, new Date(Date.now() + 3600_000), {});
  const first = await connect(wsBase(s, 0), { token: user.token });
  const firstTicket = await connect(wsBase(s, 0), { protocols: ['service-ticket', await ticket(user.token)] });
  const other = await connect(wsBase(s, 0), { token: second.token });
  const event = {
    type: 'sessionRevoked',
    userId: user.id,
    sessionId: user.sessionId,
    reason: 'revoked',
    timestamp: now(),
  };
  await publish(s, `user:${user.id}`, event);
  t.deepEqual(await first.nextJson(), event);
  t.deepEqual(await other.nextJson(), event);
  t.is((await first.closed).code, 4004);
  t.is((await firstTicket.closed).code, 4004);
  t.is(other.ws.readyState, other.ws.OPEN);
  other.close();
});

test("end to end: DELETE /v1/sessions/:token closes that session's socket", async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const conn = await connect(wsBase(s), { token: user.token });
  const del = await s.request('DELETE', `/v1/sessions/${user.token}?reason=revoked`, { token: s.systemKey });
  t.is(del.status, 204);
  const msg = await conn.nextJson((m) => m.type === 'sessionRevoked');
  t.is(msg.sessionId, user.sessionId);
  t.is((await conn.closed).code, 4004);
});

test('permissionsUpdated re-checks subscriptions: a channel the user may no longer read is dropped with an error', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const conn = await connect(wsBase(s, 0), { token: user.token });
  // Channel names of their own: the file's tests run concurrently on one stack.
  const gps = `gps:${randomUUID()}`;
  const pub = `public:${randomUUID()}`;
  await conn.subscribe(gps);
  await conn.subscribe(pub);
  await s.db('user_roles').where({ user_id: user.id }).delete();
  const event = { type: 'permissionsUpdated', userId: user.id, permissions: [], timestamp: now() };
  await publish(s, `user:${user.id}`, event);
  t.deepEqual(await conn.nextJson(), event);
  t.deepEqual(await conn.nextJson(), { type: 'error', message: `access to channel ${gps} revoked` });
  await publish(s, gps, { type: 'gpsUpdate', data: { id: 'x' } });
  t.true(await conn.nothing());
  await publish(s, pub, { type: 'message', channel: pub, data: 'still here' });
  t.is((await conn.nextJson()).data, 'still here');
  t.deepEqual(await conn.subscribe(gps), { type: 'error', message: `access denied to channel ${gps}` });
  conn.close();
});

test('rolePermissionsChanged re-checks every socket holding the role, API keys with the role included', async (t) => {
  const s = stack();
  await s.db('roles').insert({ id: 'role_tracker', name: 'Tracker', description: 't', is_system: false });
  const perm = await s.db('permissions').where({ resource: 'gps', action: 'read' }).first('id');
  await s.db('role_permissions').insert({ role_id: 'role_tracker', permission_id: perm.id });
  const user = await createUser(s.db, { roles: ['role_tracker'] });
  const key = await createKey({ userId: null });
  await s.db('api_key_roles').insert({ api_key_id: key.id, role_id: 'role_tracker' });
  const u = await connect(wsBase(s, 0), { token: user.token });
  const k = await connect(wsBase(s, 0), { token: key.key });
  const gps = `gps:${randomUUID()}`;
  t.is((await u.subscribe(gps)).data, `Subscribed to ${gps}`);
  t.is((await k.subscribe(gps)).data, `Subscribed to ${gps}`);

  await s.db('role_permissions').where({ role_id: 'role_tracker' }).delete();
  await publish(s, `user:${user.id}`, {
    type: 'rolePermissionsChanged',
    roleId: 'role_tracker',
    roleName: 'Tracker',
    timestamp: now(),
  });
  t.is((await u.nextJson()).type, 'rolePermissionsChanged');
  t.deepEqual(await u.nextJson(), { type: 'error', message: `access to channel ${gps} revoked` });
  t.deepEqual(await k.nextJson(), { type: 'error', message: `access to channel ${gps} revoked` });
  u.close();
  k.close();
});

test('a change to a widely held role is handled once per turn, not once per holder', async (t) => {
  const s = stack();
  await s.db('roles').insert({ id: 'role_crowd', name: 'Crowd', description: 'c', is_system: false });
  const perm = await s.db('permissions').where({ resource: 'gps', action: 'read' }).first('id');
  await s.db('role_permissions').insert({ role_id: 'role_crowd', permission_id: perm.id });
  const user = await createUser(s.db, { roles: ['role_crowd'] });
  const conn = await connect(wsBase(s, 0), { token: user.token });
  const gps = `gps:${randomUUID()}`;
  t.is((await conn.subscribe(gps)).data, `Subscribed to ${gps}`);
  await s.db('role_permissions').where({ role_id: 'role_crowd' }).delete();
  // Every cache drop of every resolver in this process (the api's resolver hears nothing here).
  const proto = CredentialResolver.prototype;
  const original = proto.invalidate;
  let drops = 0;
  proto.invalidate = function (this: CredentialResolver, msg) {
    if (msg.all) drops++;
    return original.call(this, msg);
  };
  try {
    // What one change to a role held by 3,000 users publishes: one push per holder.
    const timestamp = now();
    const holders = [user.id, ...Array.from({ length: 2999 }, () => randomUUID())];
    await s.api.services.bus.publishMany(
      holders.map((id) => ({
        channel: `user:${id}`,
        message: { type: 'rolePermissionsChanged', roleId: 'role_crowd', roleName: 'Crowd', timestamp },
      })),
    );
    t.is((await conn.nextJson()).type, 'rolePermissionsChanged');
    t.deepEqual(await conn.nextJson(), { type: 'error', message: `access to channel ${gps} revoked` });
  } finally {
    proto.invalidate = original;
  }
  t.true(drops >= 1);
  t.true(drops < 300, `the credential cache was dropped ${drops} times for 3,000 pushes`);
  conn.close();
});

test('end to end: removing a permission from a role through the API drops the channel on live sockets', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  await s.db('roles').insert({ id: 'role_viewer', name: 'Viewer', description: 'v', is_system: false });
  const perm = await s.db('permissions').where({ resource: 'geofences', action: 'read' }).first('id');
  await s.db('role_permissions').insert({ role_id: 'role_viewer', permission_id: perm.id });
  const user = await createUser(s.db, { roles: ['role_viewer'] });
  const conn = await connect(wsBase(s), { token: user.token });
  t.is((await conn.subscribe('geofence')).data, 'Subscribed to geofence');
  const r = await s.request('DELETE', `/v1/roles/role_viewer/permissions/${perm.id}`, { token: admin.token });
  t.is(r.status, 204, r.text);
  t.deepEqual(await conn.nextJson((m) => m.type === 'error'), {
    type: 'error',
    message: 'access to channel geofence revoked',
  });
  t.is(conn.ws.readyState, conn.ws.OPEN);
  conn.close();
});

test('a revoked API key is disconnected as soon as its invalidation arrives', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  const conn = await connect(wsBase(s, 0), { token: key.key });
  await conn.subscribe(`gps:${randomUUID()}`);
  await s.db('api_keys').where('id', key.id).update({ is_active: false });
  await s.api.services.bus.invalidateAuth({ apiKeyIds: [key.id] });
  const closed = await conn.closed;
  t.is(closed.code, 4001);
});

test("oauthConsentRevoked closes sockets opened with that client's token, not others", async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  // ws:ticket: an OAuth token mints WebSocket tickets only when its grant names that scope.
  const [client] = await s
    .db('oauth_clients')
    .insert({ user_id: user.id, name: 'App', allowed_scopes: JSON.stringify(['gps:read', 'ws:ticket']) })
    .returning('id');
  const token = randomToken('oat_', 32);
  await s.db('oauth_access_tokens').insert({
    token_hash: sha256(token),
    client_id: client.id,
    user_id: user.id,
    scopes: JSON.stringify(['gps:read', 'ws:ticket']),
    family_id: randomUUID(),
    expires_at: new Date(Date.now() + 3600_000),
  });
  const viaOauth = await connect(wsBase(s, 0), { token });
  const viaOauthTicket = await connect(wsBase(s, 0), { protocols: ['service-ticket', await ticket(token)] });
  const viaSession = await connect(wsBase(s, 0), { token: user.token });
  // The OAuth principal is narrowed to the granted scopes.
  t.is((await viaOauth.subscribe('gps')).data, 'Subscribed to gps');
  t.is((await viaOauthTicket.subscribe('gps')).data, 'Subscribed to gps');
  t.is((await viaOauthTicket.subscribe('geofence')).message, 'access denied to channel geofence');
  const event = { type: 'oauthConsentRevoked', userId: user.id, clientId: client.id, timestamp: now() };
  await publish(s, `user:${user.id}`, event);
  t.deepEqual(await viaOauth.nextJson((m) => m.type === 'oauthConsentRevoked'), event);
  t.is((await viaOauth.closed).code, 4006);
  t.is((await viaOauthTicket.closed).code, 4006);
  t.deepEqual(await viaSession.nextJson(), event);
  t.is(viaSession.ws.readyState, viaSession.ws.OPEN);
  viaSession.close();
});

test('email events reach an OAuth socket only when its grant names account:email, like the email routes', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const narrow = await createOAuthToken(s.db, user.id, ['gps:read', 'devices:read']);
  const wide = await createOAuthToken(s.db, user.id, ['gps:read', 'account:email']);
  const byNarrow = await connect(wsBase(s, 0), { token: narrow.token });
  const byNarrowProto = await connect(wsBase(s, 0), { token: narrow.token });
  const byWide = await connect(wsBase(s, 0), { token: wide.token });
  const bySession = await connect(wsBase(s, 0), { token: user.token });
  // A protobuf client gets account events as envelopes: the rule holds on that path too.
  byNarrowProto.envelope('subscribe', { channel: 'gps' });
  await byNarrowProto.nextEnvelope((e) => e.type === 'SUBSCRIBE');

  const changed = { type: 'emailChangeVerified', userId: user.id, email: 'new.address@example.test', timestamp: now() };
  const linked = { type: 'emailLinkVerified', userId: user.id, platformAccountId: randomUUID(), timestamp: now() };
  // Published last on the same channel (so delivered last), and closing nothing: another client's consent.
  const marker = { type: 'oauthConsentRevoked', userId: user.id, clientId: randomUUID(), timestamp: now() };
  for (const event of [changed, linked, marker]) await publish(s, `user:${user.id}`, event);

  for (const conn of [byWide, bySession]) {
    t.deepEqual(await conn.nextJson((m) => m.type === 'emailChangeVerified'), changed);
    t.deepEqual(await conn.nextJson((m) => m.type === 'emailLinkVerified'), linked);
  }
  t.deepEqual(await byNarrow.nextJson((m) => m.type === 'oauthConsentRevoked'), marker);
  t.deepEqual(
    byNarrow.frames.map((f) => (f.kind === 'json' ? f.data.type : f.env.payload)),
    [],
    'no email event before the marker',
  );
  await byNarrowProto.nextEnvelope((e) => e.payload === 'oauthConsentRevoked');
  t.deepEqual(
    byNarrowProto.frames.map((f) => (f.kind === 'json' ? f.data.type : f.env.payload)),
    [],
    'no email event before the marker (protobuf)',
  );
  for (const conn of [byNarrow, byNarrowProto, byWide, bySession]) conn.close();
});

test('account events are recognised whatever the key order of the published JSON', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const conn = await connect(wsBase(s, 0), { token: user.token });
  const raw = JSON.stringify({ userId: user.id, reason: 'x', timestamp: now(), type: 'forceLogout' });
  await s.redis.publish(`${s.config.redisPrefix}ws:user:${user.id}`, raw);
  const f = await conn.next();
  t.is(f.kind, 'json');
  t.is((f as { raw: string }).raw, raw);
  t.is((await conn.closed).code, 4005);
});

test('a socket opened with a ticket minted from an OAuth token closes when the token is revoked, its client deactivated or deleted', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const open = async () => {
    const oauth = await createOAuthToken(s.db, user.id, ['gps:read', 'ws:ticket']);
    const conn = await connect(wsBase(s, 0), { protocols: ['service-ticket', await ticket(oauth.token)] });
    t.is((await conn.subscribe('gps')).data, 'Subscribed to gps');
    return { ...oauth, conn };
  };
  const [revoked, deactivated, deleted] = [await open(), await open(), await open()];
  const bySession = await connect(wsBase(s, 0), { token: user.token });

  // The token alone is revoked (no consent event is published): the invalidation re-checks the socket.
  await s.db('oauth_access_tokens').where('id', revoked.tokenId).update({ revoked_at: new Date() });
  await s.api.services.bus.invalidateAuth({ userIds: [user.id] });
  t.is((await revoked.conn.closed).code, 4001);

  t.is(
    (
      await s.request('PATCH', `/v1/oauth/clients/${deactivated.clientId}`, {
        token: user.token,
        body: { is_active: false },
      })
    ).status,
    200,
  );
  t.is((await deactivated.conn.closed).code, 4001);
  t.is((await s.request('DELETE', `/v1/oauth/clients/${deleted.clientId}`, { token: user.token })).status, 204);
  t.is((await deleted.conn.closed).code, 4001);
  t.is(bySession.ws.readyState, bySession.ws.OPEN);
  bySession.close();
});

test('a ticket minted from an OAuth token opens no socket once the token no longer grants ws:ticket', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const oauth = await createOAuthToken(s.db, user.id, ['gps:read', 'ws:ticket']);
  const allow = async (scopes: string[]) => {
    const r = await s.request('PATCH', `/v1/oauth/clients/${oauth.clientId}`, {
      token: user.token,
      body: { allowed_scopes: scopes },
    });
    t.is(r.status, 200, r.text);
  };
  const minted = await ticket(oauth.token);
  t.truthy(minted);
  // The client may no longer ask for ws:ticket: its live token lost it, and so did the ticket it minted.
  await allow(['gps:read']);
  t.is((await s.request('POST', '/v1/ws/ticket', { token: oauth.token })).status, 403);
  const refused = await refusedUpgrade(wsBase(s, 0), { protocols: ['service-ticket', minted] });
  t.is(refused.status, 401);
  t.regex(refused.body.message, /ws:ticket/);

  // Allowed again, the token mints tickets that open sockets (narrowed to its grant).
  await allow(['gps:read', 'ws:ticket']);
  const conn = await connect(wsBase(s, 0), { protocols: ['service-ticket', await ticket(oauth.token)] });
  t.is((await conn.subscribe('gps')).data, 'Subscribed to gps');
  conn.close();
});

test("password reset: a session's socket gets sessionRevoked and 4004, an OAuth socket forceLogout and 4005, as docs/websocket.md shows", async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const oauth = await createOAuthToken(s.db, user.id, ['gps:read']);
  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  const bySession = await connect(wsBase(s), { token: user.token });
  const byOauth = await connect(wsBase(s), { token: oauth.token });
  const byKey = await connect(wsBase(s), { token: key.key });
  // The token the reset mail carries, issued as the passwordResets job does.
  const token = await passwordResetToken(s.db, user);
  const reset = await s.request('POST', '/v1/auth/reset-password/confirm', {
    body: { token, password: 'brand-new-pass-1' },
  });
  t.is(reset.status, 200, reset.text);

  const revoked = (await bySession.nextJson()) as Record<string, unknown>;
  t.like(revoked, { type: 'sessionRevoked', userId: user.id, sessionId: user.sessionId, reason: 'password_reset' });
  t.is((await bySession.closed).code, 4004);
  const logout = await byOauth.nextJson((m) => m.type === 'forceLogout');
  t.like(logout, { userId: user.id, reason: 'password_reset' });
  t.is((await byOauth.closed).code, 4005);
  // Logged out everywhere: the OAuth token was revoked, so it cannot reconnect (nor call REST).
  t.is((await refusedUpgrade(wsBase(s), { token: oauth.token })).status, 401);
  t.is((await s.request('GET', '/v1/users/me', { token: oauth.token })).status, 401);
  t.is(byKey.ws.readyState, byKey.ws.OPEN);
  byKey.close();

  // The page's example of a password reset is the event a session's socket receives.
  const doc = readFileSync(path.resolve(__dirname, '../../../docs/websocket.md'), 'utf8');
  const example = /`(\{"type": "\w+"[^`]*"reason": "password_reset"[^`]*\})`/.exec(doc);
  if (!example) return t.fail('docs/websocket.md shows no password_reset event');
  const shown = JSON.parse(example[1]) as Record<string, unknown>;
  t.is(shown.type, revoked.type);
  t.deepEqual(Object.keys(shown).sort(), Object.keys(revoked).sort());
});
