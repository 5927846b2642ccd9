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
