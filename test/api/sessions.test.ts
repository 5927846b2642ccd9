import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('system key creates, reads and deletes internal sessions; the token is a Bearer credential', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const expires = new Date(Date.now() + 86400_000).toISOString();
  const created = await s.request('POST', '/v1/sessions', { token: s.systemKey, body: { userId: user.id, expires } });
  t.is(created.status, 201, created.text);
  const session = created.body.data;
  t.deepEqual(Object.keys(session).sort(), ['created_at', 'expires', 'id', 'sessionToken', 'userId']);
  t.is(session.userId, user.id);
  t.is(session.expires, expires);
  t.regex(session.sessionToken, /^sess_/);
  // Only the hash is stored.
  const row = await s.db('sessions').where('id', session.id).first();
  t.not(row.token_hash, session.sessionToken);

  const me = await s.request('POST', '/v1/gql', { token: session.sessionToken, body: { query: '{ me { userId } }' } });
  t.is(me.body.data.me.userId, user.id);

  const got = await s.request('GET', `/v1/sessions/${session.sessionToken}`, { token: s.systemKey });
  t.is(got.status, 200);
  t.is(got.body.data.id, session.id);

  const del = await s.request('DELETE', `/v1/sessions/${session.sessionToken}?reason=revoked`, {
    token: s.systemKey,
    headers: { 'x-source-service': 'web' },
  });
  t.is(del.status, 204);
  t.is(del.text, '');
  const audit = await s.db('audit_events').where({ event_type: 'logout', user_id: user.id }).first();
  t.deepEqual(audit.metadata, { reason: 'revoked', session_id: session.id, app: 'web' });
  t.is((await s.request('GET', `/v1/sessions/${session.sessionToken}`, { token: s.systemKey })).status, 404);
  // The deleted session stops authenticating at once (cache invalidated through pub/sub).
  await new Promise((r) => setTimeout(r, 50));
  t.is((await s.request('GET', '/v1', { token: session.sessionToken })).status, 401);
});

test('DELETE defaults the reason to user_initiated and rejects unknown reasons', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const bad = await s.request('DELETE', `/v1/sessions/${user.token}?reason=because`, { token: s.systemKey });
  t.is(bad.status, 400);
  t.regex(bad.body.message, /^reason: /);
  t.is((await s.request('DELETE', `/v1/sessions/${user.token}`, { token: s.systemKey })).status, 204);
  const audit = await s.db('audit_events').where({ event_type: 'logout', user_id: user.id }).first();
  t.is(audit.metadata.reason, 'user_initiated');
  t.is(audit.metadata.app, null);
});

test('only the system key may use /v1/sessions: 403 for any other credential, 401 without one', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const r = await s.request('POST', '/v1/sessions', {
    token: admin.token,
    body: { userId: admin.id, expires: new Date(Date.now() + 1000).toISOString() },
  });
  // Spec §7: a valid credential without the power is a 403; only /v1/users/oauth answers 401.
  t.is(r.status, 403);
  t.is(r.body.error, 'Forbidden');
  t.is((await s.request('GET', `/v1/sessions/${admin.token}`, { token: admin.token })).status, 403);
  t.is((await s.request('DELETE', `/v1/sessions/${admin.token}`, { token: admin.token })).status, 403);
  t.is((await s.request('GET', `/v1/sessions/${admin.token}`)).status, 401);
  // Still signed in: the refused DELETE did nothing.
  t.is((await s.request('GET', '/v1/users/me', { token: admin.token })).status, 200);
});

test('bad session bodies: unknown user, past expiry', async (t) => {
  const s = stack();
  const unknown = await s.request('POST', '/v1/sessions', {
    token: s.systemKey,
    body: { userId: '00000000-0000-4000-8000-000000000000', expires: new Date(Date.now() + 1000).toISOString() },
  });
  t.is(unknown.status, 400);
  t.regex(unknown.body.message, /^userId/);
  const user = await createUser(s.db);
  const past = await s.request('POST', '/v1/sessions', {
    token: s.systemKey,
    body: { userId: user.id, expires: new Date(Date.now() - 1000).toISOString() },
  });
  t.is(past.status, 400);
  t.regex(past.body.message, /^expires/);
});

test('a relayed provider sign-in records the user’s address and its provider, on the session and in the audit', async (t) => {
  const s = stack();
  const id = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const relay = { 'x-forwarded-for': '203.0.113.7, 10.0.0.1' };
  const signIn = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    headers: relay,
    body: { email: `relay_${id}@example.test`, name: 'Relay', oauthProvider: 'github', oauthProviderId: `gh-${id}` },
  });
  t.is(signIn.status, 200, signIn.text);
  const userId = signIn.body.data.id as string;
  const login = await s.db('audit_events').where({ user_id: userId, event_type: 'login' }).first();
  t.is(login.ip_address, '203.0.113.7');
  const expires = new Date(Date.now() + 86400_000).toISOString();
  const created = await s.request('POST', '/v1/sessions', {
    token: s.systemKey,
    headers: relay,
    body: { userId, expires },
  });
  t.is(created.status, 201, created.text);
  // The session is the provider's that signed the user in just before, from the user's address.
  const listed = await s.request('GET', '/v1/users/me/sessions', { token: created.body.data.sessionToken });
  const mine = listed.body.sessions.find((x: { id: string }) => x.id === created.body.data.id);
  t.is(mine.ip_address, '203.0.113.7');
  t.is(mine.provider, 'github');
  t.is(typeof mine.provider_name, 'string');
  // session_created goes through the buffered audit writer: it lands within its flush interval.
  let audited;
  for (let i = 0; i < 40 && !audited; i++) {
    audited = await s.db('audit_events').where({ user_id: userId, event_type: 'session_created' }).first();
    if (!audited) await new Promise((r) => setTimeout(r, 50));
  }
  t.is(audited?.ip_address, '203.0.113.7');
  // A provider may be named; an unknown one is a 400 naming the field. A forwarded value that is
  // not an address is not recorded as one.
  const named = await s.request('POST', '/v1/sessions', {
    token: s.systemKey,
    headers: { 'x-forwarded-for': 'not-an-address' },
    body: { userId, expires, provider: 'email' },
  });
  t.is(named.status, 201, named.text);
  const row = await s.db('sessions').where('id', named.body.data.id).first();
  t.is(row.platform_slug, 'email');
  t.not(row.ip_address, 'not-an-address');
  // An IPv6 address with a zone id longer than the address column is not an address to record.
  const zoned = await s.request('POST', '/v1/sessions', {
    token: s.systemKey,
    headers: { 'x-forwarded-for': `fe80::1%${'z'.repeat(80)}` },
    body: { userId, expires },
  });
  t.is(zoned.status, 201, zoned.text);
  const unknown = await s.request('POST', '/v1/sessions', {
    token: s.systemKey,
    body: { userId, expires, provider: 'nowhere' },
  });
  t.is(unknown.status, 400);
  t.regex(unknown.body.message, /provider/);
});
