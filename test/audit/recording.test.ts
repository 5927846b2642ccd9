import test from 'ava';
import { hashPassword } from '../../shared/domain/passwords';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { eventually } from '../helpers/wait';

// TRUST_PROXY: the client address comes from X-Forwarded-For, so events carry a public address.
const stack = useStack(test, { env: { TRUST_PROXY: 'true', RATE_LIMIT_ANONYMOUS: '100000' } });
const PUBLIC_IP = '81.2.69.142';
const UA = 'audit-test/1.0';

async function withPassword(password: string) {
  const s = stack();
  const user = await createUser(s.db);
  await s
    .db('platform_accounts')
    .where({ user_id: user.id })
    .update({ password_hash: await hashPassword(password) });
  return user;
}

const eventsOf = (userId: string, type: string) =>
  stack().db('audit_events').where({ user_id: userId, event_type: type }).orderBy('created_at');

test('a password sign-in writes login and session_created with address, user agent, actor and geo-IP', async (t) => {
  const s = stack();
  const user = await withPassword('correct horse battery');
  const r = await s.request('POST', '/v1/auth/login', {
    body: { email: user.email, password: 'correct horse battery' },
    headers: { 'x-forwarded-for': PUBLIC_IP, 'user-agent': UA },
  });
  t.is(r.status, 200, r.text);
  const [login] = await eventsOf(user.id, 'login');
  const [created] = await eventsOf(user.id, 'session_created');
  for (const e of [login, created]) {
    t.truthy(e);
    t.is(e.ip_address, PUBLIC_IP);
    t.is(e.user_agent, UA);
    t.is(e.actor_id, user.id);
    t.is(e.status, 'success');
    t.is(e.source_service, 'api');
    t.is(e.resource_type, 'session');
    t.is(e.country_code, 'GB');
    t.is(e.country_name, 'United Kingdom');
    t.truthy(e.city);
    t.truthy(e.region);
  }
  t.is(created.resource_id, login.resource_id);
  t.truthy(await s.db('sessions').where({ id: created.resource_id, user_id: user.id }).first());
});

test('a forwarded entry that is not an address is not believed: the peer address is stored; a zone id is dropped', async (t) => {
  const s = stack();
  const user = await withPassword('correct horse battery');
  // What the proxy appended, as the api received it; the test connects from 127.0.0.1.
  const cases: Array<[string, string]> = [
    ['not-an-ip', '127.0.0.1'],
    ['x'.repeat(100), '127.0.0.1'], // longer than the address columns: once a 400 naming no field
    [Buffer.from('café').toString('latin1'), '127.0.0.1'], // UTF-8 bytes, as Node reads a header
    ['1.2.3.4%eth0', '127.0.0.1'], // an IPv4 address has no zone id
    ['2a00:1450:4001:82a::200e%eth0', '2a00:1450:4001:82a::200e'],
  ];
  for (const [forwarded, stored] of cases) {
    const r = await s.request('POST', '/v1/auth/login', {
      body: { email: user.email, password: 'correct horse battery' },
      headers: { 'x-forwarded-for': forwarded, 'user-agent': UA },
    });
    t.is(r.status, 200, `${forwarded}: ${r.text}`);
    const session = await s.db('sessions').where({ user_id: user.id }).orderBy('created_at', 'desc').first();
    t.is(session.ip_address, stored, forwarded);
    const logins = await eventsOf(user.id, 'login');
    t.is(logins[logins.length - 1].ip_address, stored, forwarded);
  }
});

test('a failed sign-in writes login_failed (failure, error_message) through the buffered writer', async (t) => {
  const s = stack();
  const user = await withPassword('right password 1');
  const r = await s.request('POST', '/v1/auth/login', {
    body: { email: user.email, password: 'wrong password 1' },
    headers: { 'x-forwarded-for': PUBLIC_IP, 'user-agent': UA },
  });
  t.is(r.status, 401);
  const [e] = await eventually(async () => {
    const rows = await eventsOf(user.id, 'login_failed');
    return rows.length ? rows : null;
  });
  t.is(e.status, 'failure');
  t.is(e.error_message, 'wrong_password');
  t.is(e.ip_address, PUBLIC_IP);
  t.is(e.user_agent, UA);
  t.is(e.country_code, 'GB');
});

test('POST /v1/sessions writes session_created; loopback leaves the geo fields empty', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const r = await s.request('POST', '/v1/sessions', {
    token: s.systemKey,
    body: { userId: user.id, expires: new Date(Date.now() + 3600_000).toISOString() },
    headers: { 'user-agent': UA },
  });
  t.is(r.status, 201, r.text);
  const [e] = await eventually(async () => {
    const rows = await eventsOf(user.id, 'session_created');
    return rows.length ? rows : null;
  });
  t.is(e.resource_type, 'session');
  t.truthy(await s.db('sessions').where({ id: e.resource_id, user_id: user.id }).first());
  t.is(e.metadata.kind, 'internal');
  t.regex(e.ip_address, /127\.0\.0\.1$/);
  t.is(e.country_code, null);
  t.is(e.country_name, null);
  t.is(e.city, null);
  t.is(e.region, null);
});

test('a provider sign-in that re-attaches an account unlinked before writes account_reconnected', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const body = { email: user.email, name: 'Chat Name', oauthProvider: 'chat', oauthProviderId: `chat-${user.id}` };
  const first = await s.request('POST', '/v1/users/oauth', { token: s.systemKey, body });
  t.is(first.status, 200, first.text);
  t.is((await eventsOf(user.id, 'account_linked')).length, 1);
  const account = await s
    .db('platform_accounts')
    .where({ user_id: user.id, platform_user_id: body.oauthProviderId })
    .first();
  const del = await s.request('DELETE', `/v1/users/me/accounts/${account.id}`, { token: user.token });
  t.is(del.status, 204, del.text);
  const [unlinked] = await eventsOf(user.id, 'account_unlinked');
  t.is(unlinked.metadata.platform_user_id, body.oauthProviderId);

  const again = await s.request('POST', '/v1/users/oauth', { token: s.systemKey, body });
  t.is(again.status, 200, again.text);
  const [reconnected] = await eventsOf(user.id, 'account_reconnected');
  t.truthy(reconnected);
  t.is(reconnected.actor_id, user.id);
  t.is((await eventsOf(user.id, 'account_linked')).length, 1, 'not recorded as a new link');
});

test('API key, OAuth client, profile and logout operations write their events with attribution', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_admin'] });
  const headers = { 'x-forwarded-for': PUBLIC_IP, 'user-agent': UA };
  const key = await s.request('POST', '/v1/api-keys', {
    token: user.token,
    headers,
    body: { name: 'k', scopes: ['gps:read'] },
  });
  t.is(key.status, 201, key.text);
  t.is((await s.request('DELETE', `/v1/api-keys/${key.body.id}`, { token: user.token, headers })).status, 204);

  const client = await s.request('POST', '/v1/oauth/clients', {
    token: user.token,
    headers,
    body: { name: 'Fleet', redirect_uris: ['https://fleet.example/cb'], allowed_scopes: ['users:read'] },
  });
  t.is(client.status, 201, client.text);
  const clientId = client.body.client.id;
  t.is(
    (
      await s.request('PATCH', `/v1/oauth/clients/${clientId}`, {
        token: user.token,
        headers,
        body: { name: 'Fleet 2' },
      })
    ).status,
    200,
  );
  t.is(
    (await s.request('POST', `/v1/oauth/clients/${clientId}/regenerate-secret`, { token: user.token, headers })).status,
    200,
  );
  t.is((await s.request('DELETE', `/v1/oauth/clients/${clientId}`, { token: user.token, headers })).status, 204);

  const patched = await s.request('PATCH', '/v1/users/me', {
    token: user.token,
    headers,
    body: { privacy_mode: true },
  });
  t.is(patched.status, 200, patched.text);

  for (const type of [
    'api_key_created',
    'api_key_revoked',
    'client_created',
    'client_updated',
    'client_secret_regenerated',
    'client_deleted',
    'user_updated',
  ]) {
    const e = await s.db('audit_events').where({ event_type: type, actor_id: user.id }).first();
    t.truthy(e, type);
    t.is(e.ip_address, PUBLIC_IP, type);
    t.is(e.user_agent, UA, type);
    t.is(e.source_service, 'api', type);
    t.is(e.country_code, 'GB', type);
  }

  const session = await s.request('POST', '/v1/sessions', {
    token: s.systemKey,
    body: { userId: user.id, expires: new Date(Date.now() + 3600_000).toISOString() },
  });
  const out = await s.request('DELETE', `/v1/sessions/${session.body.data.sessionToken}?reason=revoked`, {
    token: s.systemKey,
    headers: { 'x-source-service': 'web' },
  });
  t.is(out.status, 204, out.text);
  const [logout] = await eventsOf(user.id, 'logout');
  t.deepEqual(logout.metadata, { reason: 'revoked', session_id: logout.resource_id, app: 'web' });
});
