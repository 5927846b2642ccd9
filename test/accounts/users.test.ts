import test from 'ava';
import { createKey, createUser } from '../helpers/factories';
import { listenPushes } from '../helpers/pushes';
import { userView } from '../../shared/queries/users';
import { useStack } from '../helpers/stack';

const stack = useStack(test);
const USER_FIELDS = [
  'avatars_enabled',
  'created_at',
  'deleted_at',
  'id',
  'last_login_at',
  'preferred_locale',
  'primary_platform_account_id',
  'privacy_mode',
  'updated_at',
  'username',
];

test('GET /v1/users/me for a session and for a user-owned API key; not for ownerless keys', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const me = await s.request('GET', '/v1/users/me', { token: user.token });
  t.is(me.status, 200);
  t.deepEqual(Object.keys(me.body.data).sort(), USER_FIELDS);
  t.is(me.body.data.id, user.id);
  t.is(me.body._links.self, `/v1/users/${user.id}`);
  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  t.is((await s.request('GET', '/v1/users/me', { token: key.key })).body.data.id, user.id);
  const ownerless = await createKey({ userId: null, scopes: [] });
  t.is((await s.request('GET', '/v1/users/me', { token: ownerless.key })).status, 403);
  t.is((await s.request('GET', '/v1/users/me')).status, 401);
  // `me` also works in the id routes for the caller.
  t.is((await s.request('GET', '/v1/users/me/roles', { token: user.token })).body.roles[0].id, 'role_user');
});

test('list and get: users:read or self; 404 for unknown ids; 400 for malformed ids', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const other = await createUser(s.db);
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  t.is((await s.request('GET', '/v1/users', { token: user.token })).status, 403);
  const list = await s.request('GET', '/v1/users?limit=2', { token: admin.token });
  t.is(list.status, 200);
  t.is(list.body.data.length, 2);
  t.is(list.body.pagination.limit, 2);
  t.true(list.body.pagination.total >= 3);
  t.is((await s.request('GET', '/v1/users', { token: admin.token })).body.pagination.limit, 20);
  t.is((await s.request('GET', `/v1/users/${user.id}`, { token: user.token })).status, 200);
  t.is((await s.request('GET', `/v1/users/${other.id}`, { token: user.token })).status, 403);
  t.is((await s.request('GET', `/v1/users/${other.id}`, { token: admin.token })).body.data.id, other.id);
  t.is((await s.request('GET', '/v1/users/00000000-0000-4000-8000-000000000000', { token: admin.token })).status, 404);
  const bad = await s.request('GET', '/v1/users/not-a-uuid', { token: admin.token });
  t.is(bad.status, 400);
  t.regex(bad.body.message, /^id/);
});

test('profile is unwrapped and reflects the primary account', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const p = await s.request('GET', `/v1/users/${user.id}/profile`, { token: user.token });
  t.is(p.status, 200);
  t.deepEqual(Object.keys(p.body).sort(), [
    'avatars_enabled',
    'created_at',
    'display_name',
    'last_login_at',
    'name',
    'picture',
    'primary_provider',
    'privacy_mode',
    'provider',
  ]);
  t.is(p.body.name, user.username);
  t.is(p.body.primary_provider, 'email');
  t.is(p.body.provider, 'email');
});

test('PATCH user: fields, avatars_enabled=false clears avatars and later provider sign-ins leave them empty', async (t) => {
  const s = stack();
  const signin = {
    email: `ava_${Date.now()}@example.test`,
    name: 'Ava Tar',
    oauthProvider: 'github',
    oauthProviderId: `gh-ava-${Date.now()}`,
    image: 'https://img.example.test/a.png',
  };
  const created = await s.request('POST', '/v1/users/oauth', { token: s.systemKey, body: signin });
  const id = created.body.data.id;
  t.is(created.body.data.avatar_url, signin.image);
  const { token } = await (async () => {
    const { createSession } = await import('../../shared/commands/sessions');
    return createSession(stack().db, id, new Date(Date.now() + 3600_000));
  })();
  // All fields optional (spec §4.11): {} changes nothing and answers the user.
  const empty = await s.request('PATCH', `/v1/users/${id}`, { token, body: {} });
  t.is(empty.status, 200, empty.text);
  t.is(empty.body.data.id, id);
  t.is(empty.body.data.updated_at, created.body.data.updated_at);
  const r = await s.request('PATCH', `/v1/users/${id}`, {
    token,
    body: { privacy_mode: true, avatars_enabled: false },
  });
  t.is(r.status, 200, r.text);
  t.true(r.body.data.privacy_mode);
  t.false(r.body.data.avatars_enabled);
  t.true('preferred_locale' in r.body.data);
  const accounts = await s.db('platform_accounts').where('user_id', id);
  t.true(accounts.every((a) => a.avatar_url === null));
  const again = await s.request('POST', '/v1/users/oauth', { token: s.systemKey, body: signin });
  t.is(again.body.data.avatar_url, null);
  t.is((await s.db('platform_accounts').where('user_id', id).first()).avatar_url, null);
  const refused = await s.request('PATCH', `/v1/users/${id}`, {
    token,
    body: { avatar_url: 'https://img.example.test/b.png' },
  });
  t.is(refused.status, 400);
  t.regex(refused.body.message, /^avatar_url/);
  // Turning avatars back on: the next sign-in fills the avatar again.
  await s.request('PATCH', `/v1/users/${id}`, { token, body: { avatars_enabled: true } });
  t.is(
    (await s.request('POST', '/v1/users/oauth', { token: s.systemKey, body: signin })).body.data.avatar_url,
    signin.image,
  );
  const named = await s.request('PATCH', `/v1/users/${id}`, { token, body: { username: 'ava_renamed' } });
  t.is(named.body.data.username, 'ava_renamed');
  t.truthy(await s.db('audit_events').where({ user_id: id, event_type: 'user_updated' }).first());
});

test('PATCH email: OAuth primary accounts take it (409 when in use); email accounts must use request-change', async (t) => {
  const s = stack();
  const emailUser = await createUser(s.db);
  const other = await createUser(s.db);
  const r = await s.request('PATCH', `/v1/users/${emailUser.id}`, {
    token: emailUser.token,
    body: { email: 'new@example.test' },
  });
  t.is(r.status, 400);
  t.regex(r.body.message, /request-change/);
  const gh = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { email: null, name: 'No Mail', oauthProvider: 'github', oauthProviderId: `gh-nomail-${Date.now()}` },
  });
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  t.is(
    (await s.request('PATCH', `/v1/users/${gh.body.data.id}`, { token: admin.token, body: { email: other.email } }))
      .status,
    409,
  );
  const ok = await s.request('PATCH', `/v1/users/${gh.body.data.id}`, {
    token: admin.token,
    body: { email: 'Contact@Example.test' },
  });
  t.is(ok.status, 200);
  const acct = await s.db('platform_accounts').where('user_id', gh.body.data.id).first();
  t.is(acct.email, 'contact@example.test');
  // A typed-in address is not verified, so it never attracts another provider sign-in by email.
  t.is(acct.email_verified_at, null);
  const stranger = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: {
      email: 'contact@example.test',
      name: 'Stranger',
      oauthProvider: 'google',
      oauthProviderId: `g-str-${Date.now()}`,
    },
  });
  t.not(stranger.body.data.id, gh.body.data.id);
});

test('locale: supported values, null clears, others 400', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const de = await s.request('PATCH', `/v1/users/${user.id}/locale`, { token: user.token, body: { locale: 'DE' } });
  t.is(de.status, 200);
  t.is(de.body.data.preferred_locale, 'de');
  const fr = await s.request('PATCH', `/v1/users/${user.id}/locale`, { token: user.token, body: { locale: 'fr' } });
  t.is(fr.status, 400);
  t.regex(fr.body.message, /^locale: must be one of en, de/);
  t.is((await s.request('PATCH', `/v1/users/${user.id}/locale`, { token: user.token, body: {} })).status, 400);
  const cleared = await s.request('PATCH', `/v1/users/me/locale`, { token: user.token, body: { locale: null } });
  t.is(cleared.body.data.preferred_locale, null);
  // Configurable: an operator adds French.
  await s
    .db('system_config')
    .where('key', 'auth.supported_locales')
    .update({ value: JSON.stringify(['en', 'de', 'fr']) });
  t.is(
    (await s.request('PATCH', `/v1/users/${user.id}/locale`, { token: user.token, body: { locale: 'fr' } })).status,
    200,
  );
  await s
    .db('system_config')
    .where('key', 'auth.supported_locales')
    .update({ value: JSON.stringify(['en', 'de']) });
});

test('username: 400 invalid, 404 unknown user, 409 taken case-insensitively, 200 with the user', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const other = await createUser(s.db);
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  for (const bad of ['ab', 'a'.repeat(31), 'has space', 'dash-ed', 'ümlaut']) {
    const r = await s.request('PATCH', `/v1/users/${user.id}/username`, { token: user.token, body: { username: bad } });
    t.is(r.status, 400, bad);
    t.regex(r.body.message, /^username/);
  }
  t.is(
    (
      await s.request('PATCH', '/v1/users/00000000-0000-4000-8000-000000000000/username', {
        token: admin.token,
        body: { username: 'valid_name' },
      })
    ).status,
    404,
  );
  t.is(
    (
      await s.request('PATCH', `/v1/users/${user.id}/username`, {
        token: user.token,
        body: { username: other.username.toUpperCase() },
      })
    ).status,
    409,
  );
  t.is(
    (await s.request('PATCH', `/v1/users/${other.id}/username`, { token: user.token, body: { username: 'not_mine' } }))
      .status,
    403,
  );
  const ok = await s.request('PATCH', `/v1/users/${user.id}/username`, {
    token: user.token,
    body: { username: 'Fresh_Name_1' },
  });
  t.is(ok.status, 200);
  t.is(ok.body.data.username, 'Fresh_Name_1');
  // Changing only the case of one's own name is fine.
  t.is(
    (
      await s.request('PATCH', `/v1/users/${user.id}/username`, {
        token: user.token,
        body: { username: 'fresh_name_1' },
      })
    ).status,
    200,
  );
});

test('roles: list, assign (201 with list, 409 twice), remove (204, 404), pushes and immediate effect', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const user = await createUser(s.db);
  t.deepEqual((await s.request('GET', `/v1/users/${user.id}/roles`, { token: user.token })).body, {
    roles: [{ id: 'role_user', name: 'User', description: 'A signed-in user' }],
  });
  t.is(
    (await s.request('GET', `/v1/users/${user.id}/permissions`, { token: user.token })).body.permissions.includes(
      'users:read',
    ),
    false,
  );
  t.is((await s.request('GET', '/v1/users', { token: user.token })).status, 403);

  const pushes = await listenPushes(s.redis, s.config, `user:${user.id}`);
  try {
    const add = await s.request('POST', `/v1/users/${user.id}/roles`, {
      token: admin.token,
      body: { role_id: 'role_moderator' },
    });
    t.is(add.status, 201, add.text);
    t.deepEqual(add.body.data.map((r: any) => r.id).sort(), ['role_moderator', 'role_user']);
    const roles = await pushes.waitFor((m) => m.type === 'rolesUpdated');
    t.deepEqual(roles.roleIds.sort(), ['role_moderator', 'role_user']);
    t.deepEqual(roles.roles.sort(), ['Moderator', 'User']);
    t.truthy(roles.timestamp);
    const perms = await pushes.waitFor((m) => m.type === 'permissionsUpdated');
    t.true(perms.permissions.includes('users:ban'));
    // The cached credential was invalidated: the new permission works on the next request.
    await new Promise((r) => setTimeout(r, 50));
    t.is((await s.request('GET', '/v1/users', { token: user.token })).status, 200);
    t.true(
      (await s.request('GET', `/v1/users/${user.id}/permissions`, { token: user.token })).body.permissions.includes(
        'users:read',
      ),
    );

    t.is(
      (
        await s.request('POST', `/v1/users/${user.id}/roles`, {
          token: admin.token,
          body: { role_id: 'role_moderator' },
        })
      ).status,
      409,
    );
    // A role the body names that does not exist is bad input naming the field; an unknown user in the path is a 404.
    const nope = await s.request('POST', `/v1/users/${user.id}/roles`, {
      token: admin.token,
      body: { role_id: 'role_nope' },
    });
    t.is(nope.status, 400);
    t.like(nope.body, { error: 'BadRequest', message: 'role_id: no such role' });
    t.is(
      (
        await s.request('POST', '/v1/users/00000000-0000-4000-8000-000000000000/roles', {
          token: admin.token,
          body: { role_id: 'role_user' },
        })
      ).status,
      404,
    );

    pushes.messages.length = 0;
    const del = await s.request('DELETE', `/v1/users/${user.id}/roles/role_moderator`, { token: admin.token });
    t.is(del.status, 204);
    const after = await pushes.waitFor((m) => m.type === 'rolesUpdated');
    t.deepEqual(after.roleIds, ['role_user']);
    t.is((await s.request('DELETE', `/v1/users/${user.id}/roles/role_moderator`, { token: admin.token })).status, 404);
    await new Promise((r) => setTimeout(r, 50));
    t.is((await s.request('GET', '/v1/users', { token: user.token })).status, 403);
  } finally {
    pushes.close();
  }
});

test('roles: users:write alone cannot hand out roles with permissions the caller lacks', async (t) => {
  const s = stack();
  // No roles: the manager holds every permission the target holds (hierarchy), so only the role matters.
  const target = await createUser(s.db, { roles: [] });
  await s.db('roles').insert({ id: 'role_user_manager', name: 'User Manager', description: 'manages users' });
  const permIds = await s
    .db('permissions')
    .whereIn(s.db.raw("resource || ':' || action") as any, ['users:read', 'users:write'])
    .pluck('id');
  await s
    .db('role_permissions')
    .insert(permIds.map((permission_id: string) => ({ role_id: 'role_user_manager', permission_id })));
  const manager = await createUser(s.db, { roles: ['role_user_manager'] });
  const up = await s.request('POST', `/v1/users/${target.id}/roles`, {
    token: manager.token,
    body: { role_id: 'role_admin' },
  });
  t.is(up.status, 403);
  t.is(
    (
      await s.request('POST', `/v1/users/${target.id}/roles`, {
        token: manager.token,
        body: { role_id: 'role_user_manager' },
      })
    ).status,
    201,
  );
  const plain = await createUser(s.db);
  t.is(
    (await s.request('POST', `/v1/users/${target.id}/roles`, { token: plain.token, body: { role_id: 'role_user' } }))
      .status,
    403,
  );
});

test('user views read by id in one turn share one statement, each with its own user', async (t) => {
  const s = stack();
  const users = await Promise.all(Array.from({ length: 5 }, () => createUser(s.db)));
  const statements: string[] = [];
  // Only this test's reads: other tests of this file read user views concurrently.
  const mine = (bindings: unknown) => users.some((u) => JSON.stringify(bindings ?? []).includes(u.id));
  const listener = (q: { sql: string; bindings?: unknown }) => {
    if (/AS _accounts/.test(q.sql) && mine(q.bindings)) statements.push(q.sql);
  };
  s.db.on('query', listener);
  try {
    const ids = [...users.map((u) => u.id.toUpperCase()), '00000000-0000-4000-8000-000000000000'];
    const views = await Promise.all(ids.map((id) => userView(s.db, id)));
    t.is(statements.length, 1);
    t.deepEqual(
      views.map((v) => v?.user.id),
      [...users.map((u) => u.id), undefined],
    );
    t.true(views.slice(0, 5).every((v) => Array.isArray(v!.accounts) && v!.isBanned === false));
    // Over HTTP, the profile route answers each its own user.
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    const profiles = await Promise.all(
      users.map((u) => s.request('GET', `/v1/users/${u.id}/profile`, { token: admin.token })),
    );
    t.deepEqual(
      profiles.map((p) => p.body.name),
      users.map((u) => u.username),
    );
  } finally {
    s.db.off('query', listener);
  }
});

test('user_updated names what changed: locale changes are recorded, values sent unchanged are not', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const events = async () =>
    (
      await s
        .db('audit_events')
        .where({ user_id: user.id, event_type: 'user_updated' })
        .orderBy('created_at')
        .select('metadata')
    ).map((e) => e.metadata);
  const patch = (path: string, body: unknown) => s.request('PATCH', path, { token: user.token, body });

  t.is((await patch(`/v1/users/${user.id}/locale`, { locale: 'de' })).status, 200);
  t.is((await patch(`/v1/users/${user.id}/locale`, { locale: 'de' })).status, 200);
  t.is((await patch(`/v1/users/${user.id}/locale`, { locale: null })).status, 200);
  t.deepEqual(await events(), [
    { fields: ['preferred_locale'], previous_locale: null },
    { fields: ['preferred_locale'], previous_locale: 'de' },
  ]);

  const me = (await s.request('GET', '/v1/users/me', { token: user.token })).body.data;
  t.is((await patch(`/v1/users/${user.id}/username`, { username: me.username })).status, 200);
  t.is((await patch(`/v1/users/${user.id}`, { privacy_mode: me.privacy_mode })).status, 200);
  t.is((await events()).length, 2, 'the same values again are no change');
  t.is((await patch(`/v1/users/${user.id}`, { privacy_mode: !me.privacy_mode, username: me.username })).status, 200);
  t.deepEqual((await events())[2], { fields: ['privacy_mode'] });
});
