import test from 'ava';
import { AccessSets } from '../../shared/caches/accessSets';
import { createUser } from '../helpers/factories';
import { startSecondApi } from '../helpers/secondApi';
import { useStack } from '../helpers/stack';

/**
 * The cached access sets (README "Hot paths"): what a user or role holds is cached per instance and
 * dropped by the credential invalidations, so a change made on one instance shows on the next
 * request to the other, for the permission and role lists and for hierarchy checks.
 */
const stack = useStack(test);

async function at(url: string, method: string, path: string, token: string, body?: unknown) {
  const res = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
}

async function permId(perm: string): Promise<string> {
  const [resource, action] = perm.split(':');
  return (await stack().db('permissions').where({ resource, action }).first('id')).id;
}

test.serial('permission and role lists follow changes made on the other instance at once', async (t) => {
  const s = stack();
  const second = await startSecondApi(s);
  try {
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    const target = await createUser(s.db, { roles: ['role_user'] });
    const perms = () => at(second.url, 'GET', `/v1/users/${target.id}/permissions`, admin.token);
    const roles = () => at(second.url, 'GET', `/v1/users/${target.id}/roles`, admin.token);
    const roleNames = async () => (await roles()).body.roles.map((r: { name: string }) => r.name);

    t.false((await perms()).body.permissions.includes('gps:read'));
    t.deepEqual(await roleNames(), ['User']);

    // A role given on A: listed on B.
    t.is(
      (
        await s.request('POST', `/v1/users/${target.id}/roles`, {
          token: admin.token,
          body: { role_id: 'role_developer' },
        })
      ).status,
      201,
    );
    t.true((await perms()).body.permissions.includes('gps:read'));
    t.deepEqual(await roleNames(), ['Developer', 'User']);

    // A permission added to a role the user holds, then the role renamed and described anew.
    const role = (await s.request('POST', '/v1/roles', { token: admin.token, body: { name: 'Probe Role' } })).body.data;
    await s.request('POST', `/v1/users/${target.id}/roles`, { token: admin.token, body: { role_id: role.id } });
    t.false((await perms()).body.permissions.includes('audit:read'));
    const audit = await permId('audit:read');
    t.is(
      (
        await s.request('POST', `/v1/roles/${role.id}/permissions`, {
          token: admin.token,
          body: { permission_id: audit },
        })
      ).status,
      201,
    );
    t.true((await perms()).body.permissions.includes('audit:read'));
    t.is((await roles()).body.roles.find((r: { id: string }) => r.id === role.id).description, null);
    t.is(
      (await s.request('PATCH', `/v1/roles/${role.id}`, { token: admin.token, body: { description: 'probes' } }))
        .status,
      200,
    );
    t.is((await roles()).body.roles.find((r: { id: string }) => r.id === role.id).description, 'probes');
    t.is(
      (await s.request('PATCH', `/v1/roles/${role.id}`, { token: admin.token, body: { name: 'Another Probe' } }))
        .status,
      200,
    );
    t.deepEqual(await roleNames(), ['Another Probe', 'Developer', 'User']);

    // Taken away on A: gone on B; the role deleted: gone too.
    t.is(
      (await s.request('DELETE', `/v1/users/${target.id}/roles/role_developer`, { token: admin.token })).status,
      204,
    );
    t.false((await perms()).body.permissions.includes('gps:read'));
    t.is((await s.request('DELETE', `/v1/roles/${role.id}`, { token: admin.token })).status, 204);
    t.false((await perms()).body.permissions.includes('audit:read'));
    t.deepEqual(await roleNames(), ['User']);
  } finally {
    await second.close();
  }
});

test.serial('a hierarchy check on one instance sees a promotion made on the other (any case of the id)', async (t) => {
  const s = stack();
  const second = await startSecondApi(s);
  try {
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    const managers = (await s.request('POST', '/v1/roles', { token: admin.token, body: { name: 'Probe Managers' } }))
      .body.data;
    for (const p of ['users:read', 'users:write'])
      await s.request('POST', `/v1/roles/${managers.id}/permissions`, {
        token: admin.token,
        body: { permission_id: await permId(p) },
      });
    const manager = await createUser(s.db, { roles: ['role_user', managers.id] });
    const target = await createUser(s.db, { roles: ['role_user'] });
    for (const id of [target.id, target.id.toUpperCase()]) {
      const patch = () => at(second.url, 'PATCH', `/v1/users/${id}/locale`, manager.token, { locale: 'de' });
      t.is((await patch()).status, 200);
      await s.request('POST', `/v1/users/${target.id}/roles`, { token: admin.token, body: { role_id: 'role_admin' } });
      t.is((await patch()).status, 403, id);
      await s.request('DELETE', `/v1/users/${target.id}/roles/role_admin`, { token: admin.token });
      t.is((await patch()).status, 200, id);
    }
  } finally {
    await second.close();
  }
});

test('access sets are cached only while invalidations can arrive, and dropped by them', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_developer'] });
  // Only the access reads (both join role_permissions): the stack's own background statements on
  // this knex (the outbox relay's polling) may land between two awaits and are not what is counted.
  let statements = 0;
  const count = (q: { sql: string }) => {
    if (q.sql.includes('role_permissions')) statements++;
  };
  s.db.on('query', count);
  try {
    const reads = async (fn: () => Promise<unknown>) => {
      const before = statements;
      await fn();
      return statements - before;
    };
    const deaf = new AccessSets(s.db, () => false);
    t.is(await reads(() => deaf.user(user.id)), 1);
    t.is(await reads(() => deaf.user(user.id)), 1, 'not cached without the subscription');
    t.is(await reads(() => deaf.role('role_developer')), 1);
    t.is(await reads(() => deaf.role('role_developer')), 1);

    const sets = new AccessSets(s.db, () => true);
    t.true((await sets.user(user.id)).permissions.includes('gps:read'));
    t.is(await reads(() => sets.user(user.id.toUpperCase())), 0, 'cached');
    t.is(await reads(() => sets.role('role_developer')), 1);
    t.is(await reads(() => sets.role('role_developer')), 0);
    sets.invalidate({ apiKeyIds: [user.id] });
    t.is(await reads(() => sets.user(user.id)), 0, 'an API key invalidation keeps users');
    sets.invalidate({ userIds: [user.id.toUpperCase()] });
    t.is(await reads(() => sets.user(user.id)), 1, 'dropped for the user');
    t.is(await reads(() => sets.role('role_developer')), 0, 'roles stay');
    sets.invalidate({ all: true });
    t.is(await reads(() => sets.user(user.id)), 1);
    t.is(await reads(() => sets.role('role_developer')), 1);

    // A load that raced with an invalidation is answered but not cached.
    sets.invalidate({ all: true });
    const racing = sets.user(user.id);
    sets.invalidate({ userIds: ['00000000-0000-4000-8000-000000000000'] });
    await racing;
    t.is(await reads(() => sets.user(user.id)), 1);
  } finally {
    s.db.off('query', count);
  }
});
