import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

/**
 * The service keeps an administrator (a live user holding *:*): the last one cannot demote or delete
 * themselves. A stack of its own: this file decides who the administrators are. Serial: each test
 * counts them.
 */
const stack = useStack(test);

const liveAdmins = async () =>
  Number(
    (
      await stack().db.raw(
        `SELECT count(DISTINCT ur.user_id) AS n FROM user_roles ur JOIN users u ON u.id = ur.user_id
         WHERE ur.role_id = 'role_admin' AND u.deleted_at IS NULL AND u.scheduled_deletion_at IS NULL`,
      )
    ).rows[0].n,
  );

test.serial(
  'the last administrator cannot take their Admin role, delete their account or schedule its deletion',
  async (t) => {
    const s = stack();
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    t.is(await liveAdmins(), 1);
    const demote = await s.request('DELETE', `/v1/users/${admin.id}/roles/role_admin`, { token: admin.token });
    t.is(demote.status, 409, demote.text);
    t.regex(demote.body.message, /no administrator/);
    const del = await s.request('DELETE', `/v1/users/${admin.id}`, { token: admin.token });
    t.is(del.status, 409, del.text);
    const schedule = await s.request('DELETE', '/v1/users/me', { token: admin.token });
    t.is(schedule.status, 409, schedule.text);
    // Each of the three documents the 409.
    const doc = (await s.request('GET', '/v1/openapi.json')).body;
    for (const [path, method] of [
      ['/v1/users/{id}/roles/{role_id}', 'delete'],
      ['/v1/users/{id}', 'delete'],
      ['/v1/users/me', 'delete'],
    ])
      t.truthy(doc.paths[path][method].responses['409'], `${method} ${path} documents 409`);
    // Nothing changed: still an administrator, signed in.
    t.is(await liveAdmins(), 1);
    t.is((await s.request('GET', '/v1/users', { token: admin.token })).status, 200);
    // With a second one, either may go.
    const second = await createUser(s.db, { roles: ['role_admin'] });
    t.is((await s.request('DELETE', `/v1/users/${admin.id}/roles/role_admin`, { token: admin.token })).status, 204);
    t.is(await liveAdmins(), 1);
    t.is((await s.request('DELETE', `/v1/users/${second.id}/roles/role_admin`, { token: second.token })).status, 409);
  },
);

test.serial('two administrators demoting each other at the same time: one of them stays', async (t) => {
  const s = stack();
  // Leave only these two.
  await s.db('user_roles').where('role_id', 'role_admin').delete();
  const a = await createUser(s.db, { roles: ['role_admin'] });
  const b = await createUser(s.db, { roles: ['role_admin'] });
  for (let round = 0; round < 5; round++) {
    const results = await Promise.all([
      s.request('DELETE', `/v1/users/${a.id}/roles/role_admin`, { token: a.token }),
      s.request('DELETE', `/v1/users/${b.id}/roles/role_admin`, { token: b.token }),
    ]);
    t.deepEqual(results.map((r) => r.status).sort(), [204, 409], JSON.stringify(results.map((r) => r.text)));
    t.is(await liveAdmins(), 1);
    // Give the role back to whoever lost it, for the next round.
    for (const u of [a, b])
      await s
        .db('user_roles')
        .insert({ user_id: u.id, role_id: 'role_admin' })
        .onConflict(['user_id', 'role_id'])
        .ignore();
  }
});

const starPermissionId = async () =>
  (await stack().db('permissions').where({ resource: '*', action: '*' }).first('id')).id as string;

test.serial(
  'taking *:* from the Admin role, or deleting the role that makes the last administrator one, is 409',
  async (t) => {
    const s = stack();
    await s.db('user_roles').where('role_id', 'role_admin').delete();
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    const star = await starPermissionId();
    const take = await s.request('DELETE', `/v1/roles/role_admin/permissions/${star}`, { token: admin.token });
    t.is(take.status, 409, take.text);
    t.regex(take.body.message, /no administrator/);
    t.truthy(await s.db('role_permissions').where({ role_id: 'role_admin', permission_id: star }).first());
    // A custom role that is the only administrator's source of *:*.
    const role = await s.request('POST', '/v1/roles', { token: admin.token, body: { name: `Root ${Date.now()}` } });
    t.is(role.status, 201, role.text);
    const roleId = role.body.data.id as string;
    t.is(
      (
        await s.request('POST', `/v1/roles/${roleId}/permissions`, {
          token: admin.token,
          body: { permission_id: star },
        })
      ).status,
      201,
    );
    const other = await createUser(s.db, { roles: [] });
    await s.db('user_roles').insert({ user_id: other.id, role_id: roleId });
    await s.db('user_roles').where('role_id', 'role_admin').delete();
    t.is(await liveAdmins(), 0, 'the Admin role counts no one now; the custom role makes the administrator');
    const del = await s.request('DELETE', `/v1/roles/${roleId}`, { token: other.token });
    t.is(del.status, 409, del.text);
    const takeCustom = await s.request('DELETE', `/v1/roles/${roleId}/permissions/${star}`, { token: other.token });
    t.is(takeCustom.status, 409, takeCustom.text);
    // With another administrator, the role can go.
    await s.db('user_roles').insert({ user_id: admin.id, role_id: 'role_admin' });
    t.is((await s.request('DELETE', `/v1/roles/${roleId}`, { token: admin.token })).status, 204);
    // Both 409s are documented.
    const doc = (await s.request('GET', '/v1/openapi.json')).body;
    t.truthy(doc.paths['/v1/roles/{id}'].delete.responses['409']);
    t.truthy(doc.paths['/v1/roles/{id}/permissions/{permission_id}'].delete.responses['409']);
  },
);

test.serial('two administrators banning each other at the same time: one ban is refused', async (t) => {
  const s = stack();
  await s.db('user_roles').where('role_id', 'role_admin').delete();
  for (let round = 0; round < 3; round++) {
    const a = await createUser(s.db, { roles: ['role_admin'] });
    const b = await createUser(s.db, { roles: ['role_admin'] });
    const results = await Promise.all([
      s.request('POST', `/v1/users/${b.id}/ban`, { token: a.token, body: { reason: 'x' } }),
      s.request('POST', `/v1/users/${a.id}/ban`, { token: b.token, body: { reason: 'y' } }),
    ]);
    t.deepEqual(results.map((r) => r.status).sort(), [201, 409], JSON.stringify(results.map((r) => r.text)));
    t.is((await s.db('bans').whereIn('user_id', [a.id, b.id]).whereNull('unbanned_at')).length, 1);
    await s.db('user_roles').where('role_id', 'role_admin').delete();
  }
});

test.serial('without any administrator, changes that cannot remove one are not refused', async (t) => {
  const s = stack();
  await s.db('user_roles').where('role_id', 'role_admin').delete();
  const moderator = await createUser(s.db, { roles: ['role_user', 'role_moderator'] });
  const plain = await createUser(s.db, { roles: ['role_user'] });
  // Banning a user who is no administrator.
  const ban = await s.request('POST', `/v1/users/${plain.id}/ban`, { token: moderator.token, body: { reason: 'x' } });
  t.is(ban.status, 201, ban.text);
  // Taking an ordinary role from an ordinary user, and a user deleting their own account.
  const other = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const system = await createUser(s.db, { roles: ['role_user', 'role_admin'] });
  await s.db('user_roles').where('role_id', 'role_admin').delete();
  t.is(await liveAdmins(), 0);
  const { removeRole } = await import('../../shared/commands/assignRoles');
  await t.notThrowsAsync(() =>
    removeRole(s.api.services, other.id, 'role_api_read_only', {
      actorId: system.id,
      ipAddress: null,
      userAgent: null,
    }),
  );
  const leave = await s.request('DELETE', '/v1/users/me', { token: other.token });
  t.is(leave.status, 200, leave.text);
});
