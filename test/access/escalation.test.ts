import test from 'ava';
import { createSession } from '../../shared/commands/sessions';
import { createKey, createOAuthToken, createUser, TestUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { lockWaiters } from '../helpers/wait';

/**
 * Replays of the escalation paths found in review (issue "close the escalation paths"): each test
 * failed on the code before the fix. A request's power is its owner's current permissions ∩ its
 * credential's grant; "or self" never widens a narrowed credential; managing a user needs holding
 * every permission that user holds.
 */
const stack = useStack(test);

const ME = { query: '{ me { userId permissions } }' };
const permId = async (perm: string) => {
  const [resource, action] = perm.split(':');
  return (await stack().db('permissions').where({ resource, action }).first('id')).id as string;
};

test('finding 1: an OAuth token granted gps:read cannot touch its (super admin) user account', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const { token, clientId } = await createOAuthToken(s.db, admin.id, ['gps:read']);
  const gql = await s.request('POST', '/v1/gql', { token, body: ME });
  t.deepEqual(gql.body.data.me.permissions, ['gps:read']);
  t.is((await s.request('GET', '/v1/gps', { token })).status, 200);

  const refused: Array<[string, string, unknown?]> = [
    ['PATCH', '/v1/users/me', { username: 'taken_over' }],
    ['PATCH', `/v1/users/${admin.id}`, { privacy_mode: true }],
    ['PATCH', `/v1/users/${admin.id}/username`, { username: 'taken_over' }],
    ['PATCH', '/v1/users/me/locale', { locale: 'de' }],
    ['DELETE', '/v1/users/me'],
    ['POST', '/v1/users/me/cancel-deletion'],
    ['GET', `/v1/users/${admin.id}/accounts`],
    ['GET', '/v1/users/me/consents'],
    ['GET', '/v1/users/me/sessions'],
    ['POST', '/v1/ws/ticket'],
    [
      'POST',
      `/v1/users/${admin.id}/email-link/request`,
      { email: 'attacker@evil.test', password: 'attacker-password' },
    ],
    ['POST', `/v1/users/${admin.id}/email/request-change`, { email: 'attacker@evil.test' }],
    ['POST', '/v1/api-keys', { name: 'backdoor' }],
    // The user's own OAuth clients: a redirect URI changed by a token would hijack every later sign-in.
    ['GET', '/v1/oauth/clients'],
    ['PATCH', `/v1/oauth/clients/${clientId}`, { redirect_uris: ['https://evil.test/cb'] }],
    ['POST', `/v1/oauth/clients/${clientId}/regenerate-secret`],
  ];
  for (const [method, path, body] of refused) {
    const r = await s.request(method, path, { token, body });
    t.is(r.status, 403, `${method} ${path}: ${r.text}`);
    t.is(r.body.error, 'Forbidden');
  }
  const ticket = await s.request('POST', '/v1/gql', { token, body: { query: 'mutation { mintWsTicket { ticket } }' } });
  t.is(ticket.body.errors[0].extensions.status, 403);
  const user = await s.db('users').where('id', admin.id).first();
  t.is(user.username, admin.username);
  t.is(user.scheduled_deletion_at, null);
  t.is(await s.db('account_tokens').where('user_id', admin.id).first(), undefined);
});

test('finding 1: self-service needs the matching scope; account security needs an explicit account scope', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const writer = await createOAuthToken(s.db, user.id, ['users:read', 'users:write']);
  t.is((await s.request('PATCH', '/v1/users/me', { token: writer.token, body: { privacy_mode: true } })).status, 200);
  t.is((await s.request('GET', `/v1/users/${user.id}/accounts`, { token: writer.token })).status, 200);
  // users:write is not account:email: linking an email sign-in stays out of reach…
  const link = { email: 'second@example.test', password: 'long-enough-pw' };
  t.is((await s.request('POST', '/v1/users/me/email-link/request', { token: writer.token, body: link })).status, 403);
  // …and `*:*` does not name it either.
  const star = await createOAuthToken(s.db, user.id, ['*:*']);
  t.is((await s.request('POST', '/v1/users/me/email-link/request', { token: star.token, body: link })).status, 403);
  t.is((await s.request('POST', '/v1/ws/ticket', { token: star.token })).status, 403);
  // An app the user explicitly granted account:email may.
  const explicit = await createOAuthToken(s.db, user.id, ['users:write', 'account:email']);
  t.is(
    (
      await s.request('POST', '/v1/users/me/email/request-change', {
        token: writer.token,
        body: { email: 'new@example.test' },
      })
    ).status,
    403,
  );
  const ok = await s.request('POST', '/v1/users/me/email/request-change', {
    token: explicit.token,
    body: { email: 'new@example.test' },
  });
  t.is(ok.status, 200, ok.text);
  const ws = await createOAuthToken(s.db, user.id, ['ws:ticket']);
  t.is((await s.request('POST', '/v1/ws/ticket', { token: ws.token })).status, 201);
  // An API key of the user is never more than its scopes either.
  const key = await createKey({ userId: user.id, scopes: ['api_keys:read'] });
  t.is((await s.request('PATCH', '/v1/users/me', { token: key.key, body: { privacy_mode: false } })).status, 403);
  t.is((await s.request('DELETE', '/v1/users/me', { token: key.key })).status, 403);
});

test('finding 2: a token holding api_keys:write cannot put roles or scopes beyond its grant on a key', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const { token } = await createOAuthToken(s.db, admin.id, ['api_keys:write', 'api_keys:read']);
  t.is((await s.request('POST', '/v1/api-keys', { token, body: { name: 'wide', scopes: ['*:*'] } })).status, 403);
  const made = await s.request('POST', '/v1/api-keys', { token, body: { name: 'narrow' } });
  t.is(made.status, 201, made.text);
  const esc = await s.request('POST', `/v1/api-keys/${made.body.id}/roles`, { token, body: { role_id: 'role_admin' } });
  t.is(esc.status, 403);
  t.is(await s.db('api_key_roles').where('api_key_id', made.body.id).first(), undefined);
  t.deepEqual((await s.request('POST', '/v1/gql', { token: made.body.key, body: ME })).body.data.me.permissions, []);
});

/** The owner's own API key and an OAuth token of theirs, each holding only api_keys:write and api_keys:read. */
async function narrowCredentials(owner: TestUser): Promise<{ narrowKey: string; oauth: string }> {
  const s = stack();
  const narrowKey = (
    await s.request('POST', '/v1/api-keys', {
      token: owner.token,
      body: { name: 'narrow', scopes: ['api_keys:write', 'api_keys:read'] },
    })
  ).body.key as string;
  const { token: oauth } = await createOAuthToken(s.db, owner.id, ['api_keys:write', 'api_keys:read']);
  return { narrowKey, oauth };
}

test('a narrowed credential with api_keys:write neither regenerates nor switches back on a wider key of its owner', async (t) => {
  const s = stack();
  // Not a super admin: the owner holds API Full Access, which is more than its narrow credentials.
  const owner = await createUser(s.db, { roles: ['role_api_full_access'] });
  const wide = (
    await s.request('POST', '/v1/api-keys', {
      token: owner.token,
      body: { name: 'wide', scopes: ['users:read', 'api_keys:write', 'api_keys:read'] },
    })
  ).body;
  const { narrowKey, oauth } = await narrowCredentials(owner);
  for (const token of [narrowKey, oauth]) {
    t.is((await s.request('GET', '/v1/users', { token })).status, 403);
    const regen = await s.request('POST', `/v1/api-keys/${wide.id}/regenerate`, { token });
    t.is(regen.status, 403, regen.text);
    t.regex(regen.body.message, /the key's scopes and roles exceed your own permissions: users:read/);
    t.is(regen.body.key, undefined);
  }
  // The wide key still works: nothing was regenerated.
  t.is((await s.request('GET', '/v1/users', { token: wide.key })).status, 200);
  // Switched off by its owner (not locked), it is not switched back on by the narrow credentials.
  t.is(
    (await s.request('PATCH', `/v1/api-keys/${wide.id}`, { token: owner.token, body: { is_active: false } })).status,
    200,
  );
  for (const token of [narrowKey, oauth]) {
    const on = await s.request('PATCH', `/v1/api-keys/${wide.id}`, { token, body: { is_active: true } });
    t.is(on.status, 403, on.text);
  }
  t.is((await s.db('api_keys').where('id', wide.id).first('is_active')).is_active, false);
  // A narrow key's own regeneration, and the owner's session on the wide key, still work.
  const own = await s.db('api_keys').where({ name: 'narrow', user_id: owner.id }).first('id');
  t.is((await s.request('POST', `/v1/api-keys/${own.id}/regenerate`, { token: oauth })).status, 200);
  t.is(
    (await s.request('PATCH', `/v1/api-keys/${wide.id}`, { token: owner.token, body: { is_active: true } })).status,
    200,
  );
  const regenerated = await s.request('POST', `/v1/api-keys/${wide.id}/regenerate`, { token: owner.token });
  t.is(regenerated.status, 200, regenerated.text);
  t.is((await s.request('GET', '/v1/users', { token: regenerated.body.key })).status, 200);
});

test('a narrowed credential with api_keys:write does not extend the life of a wider key of its owner', async (t) => {
  const s = stack();
  const owner = await createUser(s.db, { roles: ['role_api_full_access'] });
  const inAnHour = new Date(Date.now() + 3600_000).toISOString();
  const wide = (
    await s.request('POST', '/v1/api-keys', {
      token: owner.token,
      body: { name: 'wide', scopes: ['users:read', 'api_keys:write'], expires_at: inAnHour },
    })
  ).body;
  const { narrowKey, oauth } = await narrowCredentials(owner);
  const later = new Date(Date.now() + 10 * 365 * 86400_000).toISOString();
  const sooner = new Date(Date.now() + 1800_000).toISOString();
  for (const token of [narrowKey, oauth]) {
    for (const expires_at of [later, null]) {
      const r = await s.request('PATCH', `/v1/api-keys/${wide.id}`, { token, body: { expires_at } });
      t.is(r.status, 403, r.text);
      t.regex(r.body.message, /the key's scopes and roles exceed your own permissions: users:read/);
    }
  }
  const stored = await s.db('api_keys').where('id', wide.id).first('expires_at');
  t.is(stored.expires_at.toISOString(), inAnHour);
  // Moving the expiry earlier only narrows: the narrow credential may.
  const shortened = await s.request('PATCH', `/v1/api-keys/${wide.id}`, { token: oauth, body: { expires_at: sooner } });
  t.is(shortened.status, 200, shortened.text);
  t.is(shortened.body.data.expires_at, sooner);
  // The owner's own session holds everything the key confers: it may extend the key or drop the expiry.
  const extended = await s.request('PATCH', `/v1/api-keys/${wide.id}`, {
    token: owner.token,
    body: { expires_at: null },
  });
  t.is(extended.status, 200, extended.text);
  t.is(extended.body.data.expires_at, null);
});

test('finding 3: roles on an API key do not outlive the owner losing them', async (t) => {
  const s = stack();
  const root = await createUser(s.db, { roles: ['role_admin'] });
  const admin = await createUser(s.db, { roles: ['role_user', 'role_admin'] });
  const victim = await createUser(s.db);
  const made = (await s.request('POST', '/v1/api-keys', { token: admin.token, body: { name: 'ops' } })).body;
  t.is(
    (await s.request('POST', `/v1/api-keys/${made.id}/roles`, { token: admin.token, body: { role_id: 'role_admin' } }))
      .status,
    201,
  );
  t.is((await s.request('GET', '/v1/users', { token: made.key })).status, 200);

  t.is((await s.request('DELETE', `/v1/users/${admin.id}/roles/role_admin`, { token: root.token })).status, 204);
  t.is((await s.request('GET', '/v1/users', { token: made.key })).status, 403);
  t.is((await s.request('POST', `/v1/users/${victim.id}/ban`, { token: made.key, body: {} })).status, 403);
  t.is(
    (await s.request('POST', `/v1/users/${admin.id}/roles`, { token: made.key, body: { role_id: 'role_admin' } }))
      .status,
    403,
  );
  t.deepEqual((await s.db('user_roles').where('user_id', admin.id).pluck('role_id')).sort(), ['role_user']);
});

test('finding 4: users:write does not take over a super admin through the email link (or any other write)', async (t) => {
  const s = stack();
  const superAdmin = await createUser(s.db, { roles: ['role_admin'] });
  const full = await createUser(s.db, { roles: ['role_api_full_access'] });
  const link = await s.request('POST', `/v1/users/${superAdmin.id}/email-link/request`, {
    token: full.token,
    body: { email: 'attacker@evil.test', password: 'attacker-password' },
  });
  t.is(link.status, 403);
  t.regex(link.body.message, /every permission/);
  t.is(await s.db('account_tokens').where('user_id', superAdmin.id).first(), undefined);
  for (const [method, path, body] of [
    ['PATCH', `/v1/users/${superAdmin.id}`, { privacy_mode: true }],
    ['PATCH', `/v1/users/${superAdmin.id}/username`, { username: 'owned_admin' }],
    ['POST', `/v1/users/${superAdmin.id}/email/request-change`, { email: 'attacker@evil.test' }],
    ['POST', `/v1/users/${superAdmin.id}/roles`, { role_id: 'role_user' }],
    ['DELETE', `/v1/users/${superAdmin.id}/roles/role_admin`, undefined],
    ['POST', `/v1/users/${superAdmin.id}/ban`, {}],
    ['POST', `/v1/admin/users/${superAdmin.id}/cancel-deletion`, undefined],
  ] as Array<[string, string, unknown]>) {
    t.is((await s.request(method, path, { token: full.token, body })).status, 403, `${method} ${path}`);
  }
  // The same caller still manages a user it outranks.
  const plain = await createUser(s.db, { roles: [] });
  t.is(
    (await s.request('PATCH', `/v1/users/${plain.id}`, { token: full.token, body: { privacy_mode: true } })).status,
    200,
  );
});

test('finding 7: users:delete holders neither soft-delete nor force-delete a super admin', async (t) => {
  const s = stack();
  const superAdmin = await createUser(s.db, { roles: ['role_admin'] });
  const full = await createUser(s.db, { roles: ['role_api_full_access'] });
  t.is((await s.request('DELETE', `/v1/users/${superAdmin.id}`, { token: full.token })).status, 403);
  t.is(
    (
      await s.request('POST', `/v1/admin/users/${superAdmin.id}/force-delete`, {
        token: full.token,
        body: { reason: 'x' },
      })
    ).status,
    403,
  );
  const row = await s.db('users').where('id', superAdmin.id).first();
  t.truthy(row);
  t.is(row.deleted_at, null);
  // Another super admin may.
  const root = await createUser(s.db, { roles: ['role_admin'] });
  t.is((await s.request('DELETE', `/v1/users/${superAdmin.id}`, { token: root.token })).status, 204);
});

test('finding 8: roles:write holders cannot remove permissions they do not hold; nor delete roles above them', async (t) => {
  const s = stack();
  const full = await createUser(s.db, { roles: ['role_api_full_access'] });
  const star = await permId('*:*');
  const r = await s.request('DELETE', `/v1/roles/role_admin/permissions/${star}`, { token: full.token });
  t.is(r.status, 403);
  t.truthy(await s.db('role_permissions').where({ role_id: 'role_admin', permission_id: star }).first());
  // A permission they hold may go, and a custom role granting more than they hold may not be deleted.
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const role = (await s.request('POST', '/v1/roles', { token: admin.token, body: { name: 'Audit Reader' } })).body.data;
  await s.request('POST', `/v1/roles/${role.id}/permissions`, {
    token: admin.token,
    body: { permission_id: await permId('gps:read') },
  });
  await s.request('POST', `/v1/roles/${role.id}/permissions`, {
    token: admin.token,
    body: { permission_id: await permId('admin:read') },
  });
  t.is((await s.request('DELETE', `/v1/roles/${role.id}`, { token: full.token })).status, 403);
  t.is(
    (await s.request('DELETE', `/v1/roles/${role.id}/permissions/${await permId('admin:read')}`, { token: full.token }))
      .status,
    403,
  );
  t.is(
    (await s.request('DELETE', `/v1/roles/${role.id}/permissions/${await permId('gps:read')}`, { token: full.token }))
      .status,
    204,
  );
});

test('a role held by a user the actor may not manage is neither emptied, changed nor deleted', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const as = (token: string) => ({ token });
  const newRole = async (name: string, perms: string[]) => {
    const role = (await s.request('POST', '/v1/roles', { ...as(admin.token), body: { name } })).body.data;
    for (const perm of perms)
      await s.request('POST', `/v1/roles/${role.id}/permissions`, {
        ...as(admin.token),
        body: { permission_id: await permId(perm) },
      });
    return role.id as string;
  };
  const manager = await newRole('Manager', ['roles:read', 'roles:write', 'roles:delete', 'users:read']);
  const helper = await newRole('Helper', ['roles:read']);
  const mgr = await createUser(s.db, { roles: [manager] });
  // dev holds Developer's tracking permissions, which mgr lacks: taking Helper from dev is refused...
  const dev = await createUser(s.db, { roles: ['role_developer', helper] });
  const take = await s.request('DELETE', `/v1/users/${dev.id}/roles/${helper}`, as(mgr.token));
  t.is(take.status, 403, take.text);
  // ...and so is every change to Helper that would do the same, or change what dev holds.
  const rolesRead = await permId('roles:read');
  const changes = [
    await s.request('DELETE', `/v1/roles/${helper}/permissions/${rolesRead}`, as(mgr.token)),
    await s.request('POST', `/v1/roles/${helper}/permissions`, {
      ...as(mgr.token),
      body: { permission_id: await permId('roles:write') },
    }),
    await s.request('PATCH', `/v1/roles/${helper}`, { ...as(mgr.token), body: { requires_two_factor: true } }),
    await s.request('DELETE', `/v1/roles/${helper}`, as(mgr.token)),
  ];
  for (const r of changes) {
    t.is(r.status, 403, r.text);
    t.regex(r.body.message, /^you may only change roles whose every holder you may manage \(missing /);
  }
  t.deepEqual(
    (await s.db('role_permissions').where('role_id', helper).select('permission_id')).map((r) => r.permission_id),
    [rolesRead],
  );
  t.truthy(await s.db('user_roles').where({ user_id: dev.id, role_id: helper }).first());
  // A holder through an API key counts too: dev's key keeps Helper after dev loses it.
  const key = await createKey({ userId: dev.id });
  const onKey = await s.request('POST', `/v1/api-keys/${key.id}/roles`, {
    ...as(dev.token),
    body: { role_id: helper },
  });
  t.is(onKey.status, 201, onKey.text);
  await s.db('user_roles').where({ user_id: dev.id, role_id: helper }).delete();
  const viaKey = await s.request('DELETE', `/v1/roles/${helper}/permissions/${rolesRead}`, as(mgr.token));
  t.is(viaKey.status, 403, viaKey.text);
  // Held only by users mgr may manage, Helper is mgr's to change.
  await s.db('api_key_roles').where('role_id', helper).delete();
  await createUser(s.db, { roles: [helper] });
  t.is((await s.request('DELETE', `/v1/roles/${helper}/permissions/${rolesRead}`, as(mgr.token))).status, 204);
  t.is((await s.request('DELETE', `/v1/roles/${helper}`, as(mgr.token))).status, 204);
});

test('finding 10: a newly signed-up user reads no tracking data', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  for (const path of [
    '/v1/gps',
    '/v1/gps/current',
    '/v1/devices',
    '/v1/trips',
    '/v1/locations',
    '/v1/geofences',
    '/v1/trip-categories',
  ]) {
    t.is((await s.request('GET', path, { token: user.token })).status, 403, path);
  }
  const perms = (await s.request('GET', '/v1/users/me/permissions', { token: user.token })).body
    .permissions as string[];
  t.deepEqual(
    perms.filter((p) => /^(gps|devices|trips|locations|geofences|trip_categories):/.test(p)),
    [],
  );
});

test('finding 16: an administrator switching a key off sticks; an expired key is not extended', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const owner = await createUser(s.db);
  const made = (await s.request('POST', '/v1/api-keys', { token: owner.token, body: { name: 'mine' } })).body;
  t.is(
    (await s.request('PATCH', `/v1/api-keys/${made.id}`, { token: admin.token, body: { is_active: false } })).status,
    200,
  );
  const back = await s.request('PATCH', `/v1/api-keys/${made.id}`, { token: owner.token, body: { is_active: true } });
  t.is(back.status, 403);
  t.false((await s.db('api_keys').where('id', made.id).first()).is_active);
  t.is((await s.request('GET', '/v1', { token: made.key })).status, 401);
  // The owner's own switch-off is theirs to undo; the administrator may undo theirs.
  t.is(
    (await s.request('PATCH', `/v1/api-keys/${made.id}`, { token: admin.token, body: { is_active: true } })).status,
    200,
  );
  t.is(
    (await s.request('PATCH', `/v1/api-keys/${made.id}`, { token: owner.token, body: { is_active: false } })).status,
    200,
  );
  t.is(
    (await s.request('PATCH', `/v1/api-keys/${made.id}`, { token: owner.token, body: { is_active: true } })).status,
    200,
  );

  // Keys switched off by the account's deletion stay off after the deletion is cancelled.
  const gone = await createUser(s.db);
  const goneKey = (await s.request('POST', '/v1/api-keys', { token: gone.token, body: { name: 'k' } })).body;
  t.is((await s.request('DELETE', `/v1/users/${gone.id}`, { token: admin.token })).status, 204);
  t.is((await s.request('POST', `/v1/admin/users/${gone.id}/cancel-deletion`, { token: admin.token })).status, 200);
  const { token: again } = await createSession(stack().db, gone.id, new Date(Date.now() + 60_000));
  t.is(
    (await s.request('PATCH', `/v1/api-keys/${goneKey.id}`, { token: again, body: { is_active: true } })).status,
    403,
  );
  t.is((await s.request('GET', '/v1', { token: goneKey.key })).status, 401);

  // An expired key cannot be revived by moving its expiry.
  const expired = await createKey({ userId: owner.id, expiresAt: new Date(Date.now() - 1000) });
  const ext = await s.request('PATCH', `/v1/api-keys/${expired.id}`, {
    token: owner.token,
    body: { expires_at: new Date(Date.now() + 86_400_000).toISOString() },
  });
  t.is(ext.status, 409);
  t.is((await s.request('GET', '/v1', { token: expired.key })).status, 401);
});

test("an administrator's switch-off sticks also against the owner's PATCH that was already under way", async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const owner = await createUser(s.db);
  const made = (await s.request('POST', '/v1/api-keys', { token: owner.token, body: { name: 'raced' } })).body;
  // The administrator's switch-off waits at the key's row, the owner's PATCH (loaded while the key
  // was on: its is_active true was no reactivation then) behind it.
  const trx = await s.db.transaction();
  await trx.raw('SELECT 1 FROM api_keys WHERE id = ? FOR UPDATE', [made.id]);
  const off = s.request('PATCH', `/v1/api-keys/${made.id}`, { token: admin.token, body: { is_active: false } });
  await lockWaiters(s.db, 1);
  const on = s.request('PATCH', `/v1/api-keys/${made.id}`, {
    token: owner.token,
    body: { name: 'raced again', is_active: true },
  });
  await lockWaiters(s.db, 2);
  await trx.commit();
  const [o, back] = await Promise.all([off, on]);
  t.is(o.status, 200, o.text);
  t.is(back.status, 403, back.text);
  const row = await s.db('api_keys').where('id', made.id).first();
  t.false(row.is_active);
  t.true(row.locked);
  t.is((await s.request('GET', '/v1', { token: made.key })).status, 401);
});
