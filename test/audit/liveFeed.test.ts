import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { connect, wsBase } from '../helpers/wsClient';

const stack = useStack(test, { realtime: 1 });

test('admins subscribed to admin:audit receive each new event as auditEvent in the REST shape', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const conn = await connect(wsBase(s, 0), { token: admin.token });
  t.deepEqual(await conn.subscribe('admin:audit'), {
    type: 'message',
    channel: 'admin:audit',
    data: 'Subscribed to admin:audit',
  });
  const user = await createUser(s.db);
  // An in-transaction event (api key created) and a buffered one (session opened by the web app).
  const key = await s.request('POST', '/v1/api-keys', {
    token: admin.token,
    body: { name: 'feed', scopes: ['gps:read'] },
  });
  t.is(key.status, 201, key.text);
  const created = await conn.nextJson((m) => m.type === 'auditEvent' && m.data.resource_id === key.body.id);
  t.deepEqual(Object.keys(created).sort(), ['data', 'type']);
  t.is(created.data.event_type, 'api_key_created');
  const rest = await s.request('GET', `/v1/admin/audit?event_type=api_key_created&user_id=${admin.id}`, {
    token: admin.token,
  });
  t.deepEqual(created.data, rest.body.events[0]);

  const session = await s.request('POST', '/v1/sessions', {
    token: s.systemKey,
    body: { userId: user.id, expires: new Date(Date.now() + 3600_000).toISOString() },
  });
  t.is(session.status, 201);
  const opened = await conn.nextJson((m) => m.type === 'auditEvent' && m.data.user_id === user.id);
  t.is(opened.data.event_type, 'session_created');
  // A logout: the delete and its event are one statement (writeAudited), its outbox row with them.
  const token = session.body.data.sessionToken as string;
  t.is((await s.request('DELETE', `/v1/sessions/${token}`, { token: s.systemKey })).status, 204);
  const logout = await conn.nextJson(
    (m) => m.type === 'auditEvent' && m.data.event_type === 'logout' && m.data.user_id === user.id,
  );
  t.is(logout.data.resource_id, opened.data.resource_id);
  t.like(logout.data.metadata, { reason: 'user_initiated', session_id: opened.data.resource_id });
  conn.close();
});

test('users without admin:read are refused admin:audit and hear nothing', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const conn = await connect(wsBase(s, 0), { token: user.token });
  t.deepEqual(await conn.subscribe('admin:audit'), { type: 'error', message: 'access denied to channel admin:audit' });
  await s.request('POST', '/v1/api-keys', { token: user.token, body: { name: 'x', scopes: [] } });
  t.true(await conn.nothing((f) => f.kind === 'json' && f.data.type === 'auditEvent', 1000));
  conn.close();
});
