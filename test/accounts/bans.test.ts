import test from 'ava';
import { hashPassword } from '../../shared/domain/passwords';
import { createKey, createUser, TestUser } from '../helpers/factories';
import { listenPushes } from '../helpers/pushes';
import { userActiveBan } from '../../shared/queries/users';
import { useStack } from '../helpers/stack';
import { sleep } from '../helpers/wait';

const stack = useStack(test, { workers: true });

async function withPassword(user: TestUser, password: string): Promise<void> {
  await stack()
    .db('platform_accounts')
    .where('user_id', user.id)
    .update({ password_hash: await hashPassword(password) });
}

test('permanent ban: 201 {data: Ban}, credentials stop at once, pushes, login refused, unban, history', async (t) => {
  const s = stack();
  const mod = await createUser(s.db, { roles: ['role_moderator'] });
  const user = await createUser(s.db);
  await withPassword(user, 'banned-user-pw');
  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  t.is((await s.request('GET', '/v1/users/me', { token: key.key })).status, 200); // now cached

  const pushes = await listenPushes(s.redis, s.config, `user:${user.id}`);
  let banId: string;
  try {
    const r = await s.request('POST', `/v1/users/${user.id}/ban`, { token: mod.token, body: { reason: 'spam' } });
    t.is(r.status, 201, r.text);
    t.deepEqual(Object.keys(r.body.data).sort(), [
      'banned_at',
      'banned_by',
      'expires_at',
      'id',
      'is_permanent',
      'reason',
      'user_id',
    ]);
    t.true(r.body.data.is_permanent);
    t.is(r.body.data.expires_at, null);
    t.is(r.body.data.banned_by, mod.id);
    banId = r.body.data.id;
    const banned = await pushes.waitFor((m) => m.type === 'accountBanned');
    t.deepEqual(
      { userId: banned.userId, reason: banned.reason, expiresAt: banned.expiresAt, isPermanent: banned.isPermanent },
      { userId: user.id, reason: 'spam', expiresAt: null, isPermanent: true },
    );
    t.truthy(banned.timestamp);
    const force = await pushes.waitFor((m) => m.type === 'forceLogout');
    t.is(force.userId, user.id);
  } finally {
    pushes.close();
  }
  await sleep(50);
  const viaKey = await s.request('GET', '/v1/users/me', { token: key.key });
  t.is(viaKey.status, 403);
  t.regex(viaKey.body.message, /banned/);
  t.is((await s.request('GET', '/v1/users/me', { token: user.token })).status, 401); // session deleted
  const login = await s.request('POST', '/v1/auth/login', { body: { email: user.email, password: 'banned-user-pw' } });
  t.is(login.status, 403);
  t.regex(login.body.message, /banned/);

  const status = await s.request('GET', `/v1/users/${user.id}/ban`, { token: mod.token });
  t.true(status.body.is_banned);
  t.is(status.body.active_ban.id, banId);
  t.is(status.body.active_ban.reason, 'spam');
  t.is((await s.request('POST', `/v1/users/${user.id}/ban`, { token: mod.token, body: {} })).status, 409);

  const un = await s.request('DELETE', `/v1/users/${user.id}/ban`, { token: mod.token });
  t.is(un.status, 200);
  t.true(un.body.success);
  t.truthy(un.body.message);
  await sleep(50);
  t.is((await s.request('GET', '/v1/users/me', { token: key.key })).status, 200);
  t.is(
    (await s.request('POST', '/v1/auth/login', { body: { email: user.email, password: 'banned-user-pw' } })).status,
    200,
  );
  t.is((await s.request('DELETE', `/v1/users/${user.id}/ban`, { token: mod.token })).status, 404);
  t.deepEqual((await s.request('GET', `/v1/users/${user.id}/ban`, { token: mod.token })).body, {
    is_banned: false,
    active_ban: null,
  });

  const history = await s.request('GET', `/v1/users/${user.id}/bans`, { token: mod.token });
  t.is(history.status, 200);
  t.is(history.body.data.length, 1);
  t.is(history.body.data[0].unbanned_by, mod.id);
  t.truthy(history.body.data[0].unbanned_at);
});

test('ban refusals: 401/403 without users:ban, 400 self and bad duration, 403 against a super admin, 404 unknown', async (t) => {
  const s = stack();
  const mod = await createUser(s.db, { roles: ['role_moderator'] });
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const user = await createUser(s.db);
  t.is((await s.request('POST', `/v1/users/${user.id}/ban`, { body: {} })).status, 401);
  t.is((await s.request('POST', `/v1/users/${mod.id}/ban`, { token: user.token, body: {} })).status, 403);
  t.is((await s.request('POST', `/v1/users/${mod.id}/ban`, { token: mod.token, body: {} })).status, 400);
  const dur = await s.request('POST', `/v1/users/${user.id}/ban`, {
    token: mod.token,
    body: { duration_seconds: 1.5 },
  });
  t.is(dur.status, 400);
  t.regex(dur.body.message, /^duration_seconds/);
  t.is(
    (await s.request('POST', `/v1/users/${user.id}/ban`, { token: mod.token, body: { duration_seconds: -5 } })).status,
    400,
  );
  t.is((await s.request('POST', `/v1/users/${admin.id}/ban`, { token: mod.token, body: {} })).status, 403);
  t.is(
    (await s.request('POST', '/v1/users/00000000-0000-4000-8000-000000000000/ban', { token: mod.token, body: {} }))
      .status,
    404,
  );
  t.is((await s.request('GET', `/v1/users/${user.id}/bans`, { token: user.token })).status, 403);
  // Self may read their own ban state.
  t.deepEqual((await s.request('GET', `/v1/users/${user.id}/ban`, { token: user.token })).body, {
    is_banned: false,
    active_ban: null,
  });
});

test('an upper-case user id bans the same user: cached credentials stop at once, the user hears of it, no self-ban', async (t) => {
  const s = stack();
  const mod = await createUser(s.db, { roles: ['role_moderator'] });
  const user = await createUser(s.db);
  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  // Both credentials cached.
  t.is((await s.request('GET', '/v1/users/me', { token: key.key })).status, 200);
  t.is((await s.request('GET', '/v1/users/me', { token: user.token })).status, 200);
  const pushes = await listenPushes(s.redis, s.config, `user:${user.id}`);
  try {
    // As Swift's UUID().uuidString and .NET's ToString().ToUpper() write ids.
    const r = await s.request('POST', `/v1/users/${user.id.toUpperCase()}/ban`, {
      token: mod.token,
      body: { reason: 'upper' },
    });
    t.is(r.status, 201, r.text);
    t.is(r.body.data.user_id, user.id);
    t.is((await pushes.waitFor((m) => m.type === 'accountBanned')).userId, user.id);
  } finally {
    pushes.close();
  }
  // The very next request (the cache was dropped synchronously on this instance).
  t.is((await s.request('GET', '/v1/users/me', { token: key.key })).status, 403);
  t.is((await s.request('GET', '/v1/users/me', { token: user.token })).status, 401);
  // "You cannot ban yourself" holds whatever the case.
  const self = await s.request('POST', `/v1/users/${mod.id.toUpperCase()}/ban`, { token: mod.token, body: {} });
  t.is(self.status, 400, self.text);
});

test('timed ban: credentials work again at expires_at by themselves; expireBans closes the history entry', async (t) => {
  const s = stack();
  const mod = await createUser(s.db, { roles: ['role_moderator'] });
  const user = await createUser(s.db);
  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  const pushes = await listenPushes(s.redis, s.config, `user:${user.id}`);
  let ban: any;
  try {
    const r = await s.request('POST', `/v1/users/${user.id}/ban`, {
      token: mod.token,
      body: { reason: 'cool down', duration_seconds: 2 },
    });
    t.is(r.status, 201);
    ban = r.body.data;
    t.false(ban.is_permanent);
    t.true(Math.abs(new Date(ban.expires_at).getTime() - (Date.now() + 2000)) < 1500);
    const push = await pushes.waitFor((m) => m.type === 'accountBanned');
    t.false(push.isPermanent);
    t.is(push.expiresAt, ban.expires_at);
  } finally {
    pushes.close();
  }
  await sleep(50);
  t.is((await s.request('GET', '/v1/users/me', { token: key.key })).status, 403);
  await sleep(Math.max(0, new Date(ban.expires_at).getTime() - Date.now()) + 100);
  t.is((await s.request('GET', '/v1/users/me', { token: key.key })).status, 200);
  t.false((await s.request('GET', `/v1/users/${user.id}/ban`, { token: mod.token })).body.is_banned);

  const feed = await listenPushes(s.redis, s.config, 'admin:audit');
  try {
    const result = await s.api.services.queues.enqueueAndWait<'scheduled', { ended: number }>(
      'scheduled',
      { task: 'expireBans' },
      10_000,
    );
    t.true(result.ended >= 1);
    // The expiry is audited, by no actor, and the admins' live feed hears of it.
    const pushed = await feed.waitFor((m) => m.type === 'auditEvent' && m.data.resource_id === ban.id);
    t.is(pushed.data.event_type, 'user_updated');
    t.is(pushed.data.actor_id, null);
    t.is(pushed.data.user_id, user.id);
    t.is(pushed.data.metadata.action, 'ban_expired');
  } finally {
    feed.close();
  }
  const history = (await s.request('GET', `/v1/users/${user.id}/bans`, { token: mod.token })).body.data;
  t.is(history[0].unbanned_at, ban.expires_at);
  t.is(history[0].unbanned_by, null);
  // A new ban is possible after expiry.
  t.is((await s.request('POST', `/v1/users/${user.id}/ban`, { token: mod.token, body: {} })).status, 201);
});

test('active-ban reads of one turn share one statement, each with its own answer; a malformed id fails alone', async (t) => {
  const s = stack();
  const users = await Promise.all(Array.from({ length: 4 }, () => createUser(s.db)));
  const [banned, , deleted] = users;
  await s.db('bans').insert({ user_id: banned.id, reason: 'batch probe', is_permanent: true });
  await s.db('users').where('id', deleted.id).update({ deleted_at: new Date() });
  const statements: string[] = [];
  const listener = (q: { sql: string }) => {
    if (/LEFT JOIN LATERAL/.test(q.sql)) statements.push(q.sql);
  };
  s.db.on('query', listener);
  try {
    const ids = [...users.map((u) => u.id), '00000000-0000-4000-8000-000000000000'];
    const answers = await Promise.all(ids.map((id) => userActiveBan(s.db, id)));
    t.is(statements.length, 1);
    t.is(answers[0]?.row?.reason, 'batch probe');
    t.deepEqual(answers[1], { row: undefined });
    // A deleted user is still a user here (bans are read with deleted users included).
    t.deepEqual(answers[2], { row: undefined });
    t.deepEqual(answers[3], { row: undefined });
    t.is(answers[4], undefined);

    statements.length = 0;
    const mixed = await Promise.allSettled([userActiveBan(s.db, banned.id), userActiveBan(s.db, 'not-a-uuid')]);
    t.is(mixed[0].status, 'fulfilled');
    t.is(
      (mixed[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof userActiveBan>>>).value?.row?.reason,
      'batch probe',
    );
    t.is(mixed[1].status, 'rejected');
    t.is(statements.length, 3);
  } finally {
    s.db.off('query', listener);
  }
});
