import test from 'ava';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { SYSTEM_KEY_ALLOWLIST } from '../../shared/policies';
import { PubSub } from '../../shared/events';
import { redisKey } from '../../shared/redis';

const stack = useStack(test);
const ME = { query: '{ me { userId apiKeyId permissions isSuperAdmin } }' };

test('a session token authenticates as its user', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const r = await s.request('POST', '/v1/gql', { token: user.token, body: ME });
  t.is(r.body.data.me.userId, user.id);
});

test('missing, malformed, unknown and expired credentials are 401', async (t) => {
  const s = stack();
  t.is((await s.request('POST', '/v1/auth/validate', { body: { token: 'x' } })).status, 401);
  const malformed = await s.request('GET', '/v1', { headers: { authorization: 'Basic abc' } });
  t.is(malformed.status, 401);
  t.is(malformed.body.error, 'Unauthorized');
  t.is((await s.request('GET', '/v1', { token: 'sk_doesnotexist' })).status, 401);
  t.is((await s.request('GET', '/v1', { token: 'sess_doesnotexist' })).status, 401);
  const user = await createUser(s.db);
  await s
    .db('sessions')
    .where('id', user.sessionId)
    .update({ expires_at: new Date(Date.now() - 1000) });
  t.is((await s.request('GET', '/v1', { token: user.token })).status, 401);
});

test('API keys: scopes narrowed to the owner, inactive and expired keys rejected, hash stored', async (t) => {
  const s = stack();
  const owner = await createUser(s.db, { roles: ['role_user', 'role_developer'] });
  const key = await createKey({ userId: owner.id, scopes: ['gps:read', 'users:delete'] });
  const r = await s.request('POST', '/v1/gql', { token: key.key, body: ME });
  t.is(r.body.data.me.apiKeyId, key.id);
  t.deepEqual(r.body.data.me.permissions, ['gps:read']); // users:delete is not the owner's to give
  const row = await s.db('api_keys').where('id', key.id).first();
  t.not(row.key_hash, key.key);
  t.is(row.key_hash.length, 64);
  t.is(row.key_prefix, key.key.slice(0, 12));

  await s.db('api_keys').where('id', key.id).update({ is_active: false });
  await s.api.services.bus.invalidateAuth({ apiKeyIds: [key.id] });
  await new Promise((res) => setTimeout(res, 50));
  t.is((await s.request('GET', '/v1', { token: key.key })).status, 401);

  const expired = await createKey({ userId: owner.id, scopes: ['gps:read'], expiresAt: new Date(Date.now() - 1000) });
  t.is((await s.request('GET', '/v1', { token: expired.key })).status, 401);
});

test("an invalidation in the previous version's format (one id per message) still drops the cache", async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  // Another owner's key: the user's message alone would drop it too.
  const key = await createKey({ userId: (await createUser(s.db)).id, scopes: ['gps:read'] });
  for (const token of [user.token, key.key]) t.is((await s.request('GET', '/v1/users/me', { token })).status, 200);
  // Changed behind the cache's back, then announced as an instance of the previous version does.
  await s.db('sessions').where('user_id', user.id).delete();
  await s.db('api_keys').where('id', key.id).update({ is_active: false });
  const channel = redisKey(s.config, PubSub.authInvalidate);
  await s.redis.publish(channel, JSON.stringify({ userId: user.id }));
  await s.redis.publish(channel, JSON.stringify({ apiKeyId: key.id }));
  await new Promise((res) => setTimeout(res, 100));
  for (const token of [user.token, key.key]) t.is((await s.request('GET', '/v1/users/me', { token })).status, 401);
});

test('API key roles add their permissions, bounded by what the owner holds', async (t) => {
  const s = stack();
  const owner = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const key = await createKey({ userId: owner.id, scopes: [] });
  await s.db('api_key_roles').insert({ api_key_id: key.id, role_id: 'role_api_read_only' });
  const r = await s.request('POST', '/v1/gql', { token: key.key, body: ME });
  t.true(r.body.data.me.permissions.includes('users:read'));
  t.false(r.body.data.me.permissions.includes('users:write'));

  // A role on the key gives nothing its owner does not hold.
  const plain = await createUser(s.db);
  const plainKey = await createKey({ userId: plain.id, scopes: [] });
  await s.db('api_key_roles').insert({ api_key_id: plainKey.id, role_id: 'role_api_read_only' });
  const p = await s.request('POST', '/v1/gql', { token: plainKey.key, body: ME });
  t.false(p.body.data.me.permissions.includes('users:read'));
});

test('a banned user gets 403 at once, a deleted user 401', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  t.is((await s.request('GET', '/v1', { token: user.token })).status, 200);
  await s.db('bans').insert({ user_id: user.id, reason: 'spam', is_permanent: true });
  await s.api.services.bus.invalidateAuth({ userIds: [user.id] });
  await new Promise((res) => setTimeout(res, 50));
  const banned = await s.request('GET', '/v1', { token: user.token });
  t.is(banned.status, 403);
  t.regex(banned.body.message, /banned/);

  const other = await createUser(s.db);
  const key = await createKey({ userId: other.id, scopes: ['gps:read'] });
  await s.db('users').where('id', other.id).update({ deleted_at: new Date() });
  await s.api.services.bus.invalidateAuth({ userIds: [other.id] });
  await new Promise((res) => setTimeout(res, 50));
  t.is((await s.request('GET', '/v1', { token: other.token })).status, 401);
  t.is((await s.request('GET', '/v1', { token: key.key })).status, 401);
});

test('X-User-Id is ignored: the system key stays the raw system context', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const r = await s.request('POST', '/v1/gql', { token: s.systemKey, body: ME, headers: { 'x-user-id': user.id } });
  t.is(r.body.data.me.userId, null);
  t.true(r.body.data.me.isSuperAdmin);
  const u = await s.request('POST', '/v1/gql', {
    token: user.token,
    body: ME,
    headers: { 'x-user-id': '00000000-0000-0000-0000-000000000000' },
  });
  t.is(u.body.data.me.userId, user.id);
});

test('system key is refused on every non-allowlisted route, public or protected', async (t) => {
  const s = stack();
  for (const path of [
    '/v1',
    '/health',
    '/v1/health',
    '/v1/users',
    '/v1/gps',
    '/v1/openapi.json',
    '/v1/users/oauthx',
    '/v1/auth/login/extra',
    '/v1/gqlx',
    '/v1/internal/audit/x',
  ]) {
    const r = await s.request('GET', path, { token: s.systemKey });
    t.is(r.status, 403, path);
    t.is(r.body.message, 'system key not permitted on this route', path);
  }
});

test('system key passes the allowlist on each of the 11 routes (exact and prefix)', async (t) => {
  const s = stack();
  t.is(SYSTEM_KEY_ALLOWLIST.length, 11);
  const probes = [
    '/v1/users/oauth',
    '/v1/users/email/someone@example.test',
    '/v1/users/email/verify',
    '/v1/sessions',
    '/v1/sessions/sess_abc',
    '/v1/auth/login',
    '/v1/auth/2fa/check',
    '/v1/auth/verify-email',
    '/v1/auth/reset-password/request',
    '/v1/auth/register/verify',
    '/v1/internal/audit',
    '/v1/gql',
    '/v1/ws',
  ];
  for (const path of probes) {
    const r = await s.request('POST', path, { token: s.systemKey, body: {} });
    t.false(r.status === 403 && r.body?.message === 'system key not permitted on this route', `${path} was refused`);
  }
});

test('SYSTEM_API_KEY bootstrap is idempotent and the key is a system key', async (t) => {
  const s = stack();
  const { ensureSystemApiKey } = await import('../../shared/commands/apiKeys');
  await ensureSystemApiKey(s.db, s.systemKey);
  await ensureSystemApiKey(s.db, s.systemKey);
  const rows = await s.db('api_keys').where('is_system', true);
  t.is(rows.length, 1);
  t.deepEqual(rows[0].scopes, ['*:*']);
});

test('401 without credentials vs 403 without permission', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  // POST /v1/sessions needs the system key: a user's credential is valid but not enough (403).
  const r = await s.request('POST', '/v1/sessions', { token: user.token, body: {} });
  t.is(r.status, 403);
  const r2 = await s.request('POST', '/v1/sessions', { body: {} });
  t.is(r2.status, 401);
});
