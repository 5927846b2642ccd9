import test from 'ava';
import { AUDIT_ANONYMISE_BATCH } from '../../shared/commands/userLifecycle';
import { createKey, createUser } from '../helpers/factories';
import { listenInvalidations, listenPushes } from '../helpers/pushes';
import { statementsOn } from '../helpers/statements';
import { useStack } from '../helpers/stack';
import { countRows } from '../helpers/tracking';
import { lockWaiters, sleep } from '../helpers/wait';

const stack = useStack(test, { workers: true });
const DAY = 86400_000;

test('soft delete: 204, sessions and API keys revoked at once, push, status, 409 twice, cancel restores', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const mod = await createUser(s.db, { roles: ['role_moderator'] });
  const user = await createUser(s.db);
  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  t.is((await s.request('GET', '/v1/users/me', { token: key.key })).status, 200);
  t.is((await s.request('DELETE', `/v1/users/${user.id}`, { token: mod.token })).status, 403);
  t.is((await s.request('DELETE', `/v1/users/${user.id}`, { token: user.token })).status, 403);

  const pushes = await listenPushes(s.redis, s.config, `user:${user.id}`);
  try {
    t.is((await s.request('DELETE', `/v1/users/${user.id}`, { token: admin.token })).status, 204);
    const push = await pushes.waitFor((m) => m.type === 'accountDeleted');
    t.is(push.userId, user.id);
    t.truthy(push.reason);
    t.truthy(push.timestamp);
    await pushes.waitFor((m) => m.type === 'forceLogout');
  } finally {
    pushes.close();
  }
  await sleep(50);
  t.is((await s.request('GET', '/v1/users/me', { token: user.token })).status, 401);
  t.is((await s.request('GET', '/v1/users/me', { token: key.key })).status, 401);
  t.is((await s.db('sessions').where('user_id', user.id)).length, 0);
  t.false((await s.db('api_keys').where('id', key.id).first()).is_active);
  const got = await s.request('GET', `/v1/users/${user.id}`, { token: admin.token });
  t.truthy(got.body.data.deleted_at);
  const status = await s.request('GET', `/v1/admin/users/${user.id}/deletion-status`, { token: admin.token });
  t.is(status.status, 200);
  t.true(status.body.is_deleted);
  t.true(status.body.is_scheduled_for_deletion);
  t.true(Math.abs(new Date(status.body.scheduled_deletion_at).getTime() - (Date.now() + 7 * DAY)) < 60_000);
  t.is((await s.request('DELETE', `/v1/users/${user.id}`, { token: admin.token })).status, 409);
  t.truthy(await s.db('audit_events').where({ user_id: user.id, event_type: 'user_deleted' }).first());

  t.is((await s.request('POST', `/v1/admin/users/${user.id}/cancel-deletion`, { token: mod.token })).status, 403);
  const cancel = await s.request('POST', `/v1/admin/users/${user.id}/cancel-deletion`, { token: admin.token });
  t.is(cancel.status, 200);
  t.true(cancel.body.success);
  t.deepEqual((await s.request('GET', `/v1/admin/users/${user.id}/deletion-status`, { token: admin.token })).body, {
    is_scheduled_for_deletion: false,
    scheduled_deletion_at: null,
    is_deleted: false,
    deleted_at: null,
  });
  t.is((await s.request('POST', `/v1/admin/users/${user.id}/cancel-deletion`, { token: admin.token })).status, 409);
  t.is(
    (
      await s.request('GET', '/v1/admin/users/00000000-0000-4000-8000-000000000000/deletion-status', {
        token: admin.token,
      })
    ).status,
    404,
  );
});

test('deleting a user with many API keys drops them all with one invalidation', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const user = await createUser(s.db);
  const keys = await Promise.all(
    Array.from({ length: 40 }, () => createKey({ userId: user.id, scopes: ['gps:read'] })),
  );
  for (const k of keys.slice(0, 3)) t.is((await s.request('GET', '/v1/users/me', { token: k.key })).status, 200);
  const invalidations = await listenInvalidations(s.redis, s.config);
  try {
    t.is((await s.request('DELETE', `/v1/users/${user.id}`, { token: admin.token })).status, 204);
    // Other tests of this file share the stack: only messages naming this user's keys count.
    const ids = new Set(keys.map((k) => k.id));
    const named = invalidations.messages.filter((m) => m.apiKeyIds?.some((id: string) => ids.has(id)));
    t.is(named.length, 1, JSON.stringify(invalidations.messages));
    t.deepEqual([...named[0].apiKeyIds].sort(), keys.map((k) => k.id).sort());
  } finally {
    invalidations.close();
  }
  for (const k of keys.slice(0, 3)) t.is((await s.request('GET', '/v1/users/me', { token: k.key })).status, 401);
});

test('self-service: DELETE /v1/users/me schedules the deletion 7 days out; the user keeps access and can cancel', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const r = await s.request('DELETE', '/v1/users/me', { token: user.token });
  t.is(r.status, 200, r.text);
  t.true(r.body.success);
  t.true(Math.abs(new Date(r.body.scheduled_deletion_at).getTime() - (Date.now() + 7 * DAY)) < 60_000);
  const row = await s.db('users').where('id', user.id).first();
  t.is(row.deleted_at, null);
  t.truthy(row.scheduled_deletion_at);
  t.is((await s.request('GET', '/v1/users/me', { token: user.token })).status, 200);
  // Asking again keeps the first date.
  t.is(
    (await s.request('DELETE', '/v1/users/me', { token: user.token })).body.scheduled_deletion_at,
    r.body.scheduled_deletion_at,
  );
  const c = await s.request('POST', '/v1/users/me/cancel-deletion', { token: user.token });
  t.is(c.status, 200);
  t.is((await s.db('users').where('id', user.id).first()).scheduled_deletion_at, null);
  t.is((await s.request('POST', '/v1/users/me/cancel-deletion', { token: user.token })).status, 409);
  const key = await createKey({ userId: user.id, scopes: ['users:delete'] });
  t.is((await s.request('DELETE', '/v1/users/me', { token: key.key })).status, 403);
});

test('the purge job deletes only accounts whose grace period has ended', async (t) => {
  const s = stack();
  const due = await createUser(s.db);
  const softDue = await createUser(s.db);
  const notYet = await createUser(s.db);
  const active = await createUser(s.db);
  await s
    .db('users')
    .where('id', due.id)
    .update({ scheduled_deletion_at: new Date(Date.now() - 1000) });
  await s
    .db('users')
    .where('id', softDue.id)
    .update({ scheduled_deletion_at: new Date(Date.now() - DAY), deleted_at: new Date(Date.now() - 8 * DAY) });
  await s
    .db('users')
    .where('id', notYet.id)
    .update({ scheduled_deletion_at: new Date(Date.now() + DAY) });
  await s.db('audit_events').insert({
    user_id: due.id,
    actor_id: due.id,
    event_type: 'login',
    ip_address: '192.0.2.9',
    user_agent: 'UA',
    city: 'Berlin',
    metadata: JSON.stringify({ platform: 'email' }),
  });
  await s
    .db('email_outbox')
    .insert({ to_address: due.email, subject: 's', text_body: 't', user_id: due.id, status: 'sent' });

  const pushes = await listenPushes(s.redis, s.config, `user:${due.id}`);
  try {
    const result = await s.api.services.queues.enqueueAndWait<'scheduled', { purged: number; failed: number }>(
      'scheduled',
      { task: 'purgeDeletedAccounts' },
      15_000,
    );
    t.is(result.failed, 0);
    t.true(result.purged >= 2);
    await pushes.waitFor((m) => m.type === 'accountDeleted');
  } finally {
    pushes.close();
  }
  const remaining = await s.db('users').whereIn('id', [due.id, softDue.id, notYet.id, active.id]).pluck('id');
  t.deepEqual(remaining.sort(), [notYet.id, active.id].sort());
  t.is((await s.db('platform_accounts').where('user_id', due.id)).length, 0);
  t.is((await s.db('sessions').where('user_id', due.id)).length, 0);
  t.is((await s.db('user_roles').where('user_id', due.id)).length, 0);
  t.is((await s.db('email_outbox').where('to_address', due.email)).length, 0);
  t.is((await s.db('audit_events').where('user_id', due.id).orWhere('actor_id', due.id)).length, 0);
  const anon = await s
    .db('audit_events')
    .where({ event_type: 'login', city: null })
    .whereNull('user_id')
    .whereRaw("metadata = '{}'::jsonb");
  t.true(anon.length >= 1);
  t.false(JSON.stringify(await s.db('audit_events')).includes('192.0.2.9'));
  const trail = await s.db('audit_events').where({ event_type: 'user_deleted', resource_id: due.id }).first();
  t.is(trail.metadata.stage, 'purged');
});

test('force-delete: 200, personal data gone at once, 404 afterwards; refusals', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const mod = await createUser(s.db, { roles: ['role_moderator'] });
  const user = await createUser(s.db);
  await s.request('GET', '/v1/users/me', { token: user.token, headers: { 'user-agent': 'Secret UA' } });
  await s.request('PATCH', `/v1/users/${user.id}/username`, {
    token: user.token,
    body: { username: `renamed_${Date.now().toString(36)}` },
  });
  t.is(
    (await s.request('POST', `/v1/admin/users/${user.id}/force-delete`, { token: mod.token, body: { reason: 'x' } }))
      .status,
    403,
  );
  t.is(
    (await s.request('POST', `/v1/admin/users/${admin.id}/force-delete`, { token: admin.token, body: { reason: 'x' } }))
      .status,
    400,
  );
  // An active account is not purged at once: the state machine goes through a scheduled deletion.
  const active = await s.request('POST', `/v1/admin/users/${user.id}/force-delete`, {
    token: admin.token,
    body: { reason: 'x' },
  });
  t.is(active.status, 409, active.text);
  t.regex(active.body.message, /no deletion is scheduled/);
  t.truthy(await s.db('users').where('id', user.id).first());
  t.is((await s.request('DELETE', '/v1/users/me', { token: user.token })).status, 200);
  const pushes = await listenPushes(s.redis, s.config, `user:${user.id}`);
  try {
    const r = await s.request('POST', `/v1/admin/users/${user.id}/force-delete`, {
      token: admin.token,
      body: { reason: 'GDPR request' },
    });
    t.is(r.status, 200, r.text);
    t.true(r.body.success);
    t.truthy(r.body.message);
    const push = await pushes.waitFor((m) => m.type === 'accountDeleted');
    t.is(push.reason, 'GDPR request');
  } finally {
    pushes.close();
  }
  t.falsy(await s.db('users').where('id', user.id).first());
  t.is((await s.db('platform_accounts').where('user_id', user.id)).length, 0);
  t.is((await s.db('audit_events').where('user_id', user.id)).length, 0);
  t.false(JSON.stringify(await s.db('audit_events')).includes(user.username));
  const trail = await s.db('audit_events').where({ event_type: 'user_deleted', resource_id: user.id }).first();
  t.is(trail.actor_id, admin.id);
  t.is(trail.metadata.reason, 'GDPR request');
  await sleep(50);
  t.is((await s.request('GET', '/v1/users/me', { token: user.token })).status, 401);
  t.is((await s.request('GET', `/v1/users/${user.id}`, { token: admin.token })).status, 404);
  t.is((await s.request('GET', `/v1/admin/users/${user.id}/deletion-status`, { token: admin.token })).status, 404);
  t.is(
    (await s.request('POST', `/v1/admin/users/${user.id}/force-delete`, { token: admin.token, body: {} })).status,
    404,
  );
});

test('force-delete anonymises a long audit history in bounded batches', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const user = await createUser(s.db);
  const other = await createUser(s.db);
  // Events about the user, and events the user did to someone else (actor only).
  const n = 2 * AUDIT_ANONYMISE_BATCH + 5;
  await s.db.raw(
    `INSERT INTO audit_events (user_id, actor_id, event_type, ip_address, user_agent, metadata)
     SELECT CASE WHEN g % 4 = 0 THEN ?::uuid ELSE ?::uuid END, ?::uuid, 'login', '192.0.2.7', 'Long History UA',
            jsonb_build_object('n', g)
       FROM generate_series(1, ?) g`,
    [other.id, user.id, user.id, n],
  );
  t.is((await s.request('DELETE', `/v1/users/${user.id}`, { token: admin.token })).status, 204);
  const { result, sql } = await statementsOn(s.db, 'audit_events', () =>
    s.request('POST', `/v1/admin/users/${user.id}/force-delete`, { token: admin.token, body: { reason: 'long' } }),
  );
  t.is(result.status, 200, result.text);
  const batches = sql.filter((q) =>
    /^update "audit_events" set .* where "id" in \(select "id" from "audit_events"/.test(q),
  );
  t.is(batches.length, 3, sql.join('\n'));
  t.is(await countRows(s.db('audit_events').where('user_id', user.id).orWhere('actor_id', user.id)), 0);
  t.is(await countRows(s.db('audit_events').where('user_agent', 'Long History UA')), 0);
  // The other user's events keep their subject; only the actor was cleared.
  t.is(
    await countRows(s.db('audit_events').where({ user_id: other.id, event_type: 'login' }).whereNull('actor_id')),
    n >> 2,
  );
});

test("cancelling a soft delete is refused while another live user holds the account's address", async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const user = await createUser(s.db);
  t.is((await s.request('DELETE', `/v1/users/${user.id}`, { token: admin.token })).status, 204);
  // While the account is deleted, its address is free: a provider sign-in with it makes a new user.
  const signIn = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { email: user.email, name: 'Other Person', oauthProvider: 'chat', oauthProviderId: `chat-${user.id}` },
  });
  t.is(signIn.status, 200, signIn.text);
  const holders = await s
    .db('platform_accounts')
    .join('users', 'users.id', 'platform_accounts.user_id')
    .whereRaw('lower(platform_accounts.email) = lower(?)', [user.email])
    .whereNull('users.deleted_at')
    .distinct('users.id');
  t.is(holders.length, 1);
  t.not(holders[0].id, user.id);

  const cancel = await s.request('POST', `/v1/admin/users/${user.id}/cancel-deletion`, { token: admin.token });
  t.is(cancel.status, 409, cancel.text);
  t.regex(cancel.body.message, /used by another account/);
  // Still deleted; the address has one live user.
  t.truthy((await s.db('users').where('id', user.id).first()).deleted_at);

  // Once the other user's account no longer carries it, the restore goes through.
  await s.db('platform_accounts').where('user_id', holders[0].id).update({ email: 'elsewhere@example.test' });
  const again = await s.request('POST', `/v1/admin/users/${user.id}/cancel-deletion`, { token: admin.token });
  t.is(again.status, 200, again.text);
  t.is((await s.db('users').where('id', user.id).first()).deleted_at, null);
});

test.serial(
  'restoring a soft-deleted user while it signs in through its provider: both answer, no deadlock',
  async (t) => {
    const s = stack();
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    const email = `restore-race-${Date.now()}@example.test`;
    const body = { email, name: 'Race Person', oauthProvider: 'chat', oauthProviderId: `chat-race-${Date.now()}` };
    const first = await s.request('POST', '/v1/users/oauth', { token: s.systemKey, body });
    t.is(first.status, 200, first.text);
    const userId = (await s.db('platform_accounts').where('platform_user_id', body.oauthProviderId).first()).user_id;
    t.is((await s.request('DELETE', `/v1/users/${userId}`, { token: admin.token })).status, 204);
    const waiters = (n: number) => lockWaiters(s.db, n);
    // Another writer holds the user's row: the restore and the sign-in queue up behind it together.
    const hold = await s.db.transaction();
    try {
      await hold.raw('SELECT id FROM users WHERE id = ? FOR UPDATE', [userId]);
      const restore = s.request('POST', `/v1/admin/users/${userId}/cancel-deletion`, { token: admin.token });
      await waiters(1);
      const signIn = s.request('POST', '/v1/users/oauth', { token: s.systemKey, body });
      await waiters(2);
      await hold.commit();
      const [r, g] = await Promise.all([restore, signIn]);
      t.is(r.status, 200, r.text);
      t.true(g.status < 500 && g.status !== 409, `sign-in: ${g.status} ${g.text}`);
    } finally {
      if (!hold.isCompleted()) await hold.rollback();
    }
    t.is((await s.db('users').where('id', userId).first()).deleted_at, null);
  },
);
