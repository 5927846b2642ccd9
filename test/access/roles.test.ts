import test from 'ava';
import { startSecondApi } from '../helpers/secondApi';
import { createKey, createUser } from '../helpers/factories';
import { listenInvalidations, listenPushes } from '../helpers/pushes';
import { useStack } from '../helpers/stack';

const stack = useStack(test);
const ME = { query: '{ me { permissions roles } }' };

async function permId(perm: string): Promise<string> {
  const [resource, action] = perm.split(':');
  return (await stack().db('permissions').where({ resource, action }).first('id')).id;
}

async function mePermissions(token: string, url?: string): Promise<string[]> {
  if (url) {
    const r = await fetch(`${url}/v1/gql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(ME),
    });
    return ((await r.json()) as { data: { me: { permissions: string[] } } }).data.me.permissions;
  }
  const r = await stack().request('POST', '/v1/gql', { token, body: ME });
  return r.body.data.me.permissions;
}

test('roles: list and get need roles:read; anonymous is 401', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const plain = await createUser(s.db, { roles: ['role_user'] });
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  t.is((await s.request('GET', '/v1/roles')).status, 401);
  t.is((await s.request('GET', '/v1/roles', { token: plain.token })).status, 403);
  const list = await s.request('GET', '/v1/roles', { token: dev.token });
  t.is(list.status, 200);
  const names = list.body.data.map((r: { name: string }) => r.name);
  for (const n of ['Admin', 'User', 'Moderator', 'Developer', 'API Read Only', 'API Full Access', 'System'])
    t.true(names.includes(n), n);
  t.deepEqual(Object.keys(list.body.data[0]).sort(), [
    'created_at',
    'description',
    'id',
    'is_system',
    'name',
    'requires_two_factor',
    'updated_at',
  ]);
  const one = await s.request('GET', '/v1/roles/role_admin', { token: admin.token });
  t.is(one.status, 200);
  t.is(one.body.data.name, 'Admin');
  t.true(one.body.data.is_system);
  t.is(one.body._links.self, '/v1/roles/role_admin');
  t.is((await s.request('GET', '/v1/roles/role_nope', { token: admin.token })).status, 404);
});

test('role names are unique regardless of case, also between concurrent requests', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const spellings = ['Racer', 'racer', 'RACER', 'rAcEr', 'RaCeR', 'racER', 'RACer', 'raCER'];
  for (let round = 0; round < 3; round++) {
    const name = (x: string) => `${x} ${round}`;
    const answers = await Promise.all(
      spellings.map((x) => s.request('POST', '/v1/roles', { token: admin.token, body: { name: name(x) } })),
    );
    t.deepEqual(
      answers.map((r) => r.status).sort(),
      [201, ...spellings.slice(1).map(() => 409)],
      answers.map((r) => r.text).join('\n'),
    );
    for (const r of answers.filter((a) => a.status === 409)) t.is(r.body.error, 'Conflict');
    // A rename to another spelling of a taken name is refused the same way, also when raced.
    const others = await Promise.all(
      spellings.slice(0, 4).map(async (x, i) => {
        const made = await s.request('POST', '/v1/roles', {
          token: admin.token,
          body: { name: `other ${round} ${i}` },
        });
        t.is(made.status, 201);
        return s.request('PATCH', `/v1/roles/${made.body.data.id}`, {
          token: admin.token,
          body: { name: name(`${x}2`) },
        });
      }),
    );
    t.deepEqual(others.map((r) => r.status).sort(), [200, 409, 409, 409]);
  }
});

test('role names are compared in Unicode NFC: a decomposed spelling of a taken name is 409', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const decomposed = 'Cafe\u0301 crew';
  const made = await s.request('POST', '/v1/roles', { token: admin.token, body: { name: decomposed } });
  t.is(made.status, 201, made.text);
  t.is(made.body.data.name, 'Caf\u00e9 crew');
  const again = await s.request('POST', '/v1/roles', { token: admin.token, body: { name: 'CAF\u00e9 crew' } });
  t.is(again.status, 409, again.text);
  const other = await s.request('POST', '/v1/roles', { token: admin.token, body: { name: 'Tea crew' } });
  const renamed = await s.request('PATCH', `/v1/roles/${other.body.data.id}`, {
    token: admin.token,
    body: { name: 'cafe\u0301 CREW' },
  });
  t.is(renamed.status, 409, renamed.text);
});

test('a role name is measured in its stored (NFC) form: a name NFC makes too long is a 400 naming the field', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  // U+FB2C is one code point sent and three in NFC; U+0958 is one sent and two in NFC.
  const fits = await s.request('POST', '/v1/roles', { token: admin.token, body: { name: '\uFB2C'.repeat(33) } });
  t.is(fits.status, 201, fits.text);
  t.is([...fits.body.data.name].length, 99);
  for (const name of ['\uFB2C'.repeat(34), '\u0958'.repeat(51)]) {
    const r = await s.request('POST', '/v1/roles', { token: admin.token, body: { name } });
    t.is(r.status, 400, r.text);
    t.is(r.body.message, 'name: must be at most 100 characters');
  }
  const other = await s.request('POST', '/v1/roles', { token: admin.token, body: { name: 'Lengthening' } });
  const renamed = await s.request('PATCH', `/v1/roles/${other.body.data.id}`, {
    token: admin.token,
    body: { name: '\uFB2C'.repeat(60) },
  });
  t.is(renamed.status, 400, renamed.text);
  t.is(renamed.body.message, 'name: must be at most 100 characters');
  t.is((await s.db('roles').where('id', other.body.data.id).first('name')).name, 'Lengthening');
});

test('a role name cannot look like another: invisible characters and mixed scripts are a 400, compatibility forms are the same name', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const post = (name: string) => s.request('POST', '/v1/roles', { token: admin.token, body: { name } });
  const invisible = [
    'Admin\u200b', // zero-width space
    'Ad\u00admin', // soft hyphen
    'Admin\u2060', // word joiner
    'Admin\u200f', // right-to-left mark
    '\u202eAdmin', // right-to-left override
    'Adm\u034fin', // combining grapheme joiner
    'Admin\ufe0f', // variation selector
    'Admin\u3164', // Hangul filler
    'Admin\u{e0041}', // tag character
    'Ad\nmin',
    'Admin\u2800', // braille blank
  ];
  for (const name of invisible) {
    const r = await post(name);
    t.is(r.status, 400, JSON.stringify(name));
    t.regex(r.body.message, /^name: must not contain invisible or formatting characters \(U\+[0-9A-F]{4,5}\)$/);
  }
  for (const [name, scripts] of [
    ['\u0410dmin', 'Latin and Cyrillic'], // Cyrillic А
    ['\u0391dmin', 'Latin and Greek'], // Greek Α
    ['Support \u0442\u0435\u0430m', 'Latin and Cyrillic'],
    ['\u0391\u0434\u043c\u0438\u043d', 'Greek and Cyrillic'],
  ]) {
    const r = await post(name);
    t.is(r.status, 400, name);
    t.is(r.body.message, `name: must not mix letters of different scripts (${scripts})`);
  }
  // Full-width letters, a ligature, the Kelvin sign: equal to a taken name in NFKC and lower case.
  for (const name of ['\uFF21\uFF44\uFF4D\uFF49\uFF4E', '\uFF41\uFF24\uFF2D\uFF29\uFF2E']) {
    const r = await post(name);
    t.is(r.status, 409, `${name}: ${r.text}`);
    t.is(r.body.error, 'Conflict');
  }
  t.is((await post('\uFB01nance team')).status, 201);
  t.is((await post('Finance Team')).status, 409);
  t.is((await post('\u212Aeel crew')).status, 201);
  t.is((await post('keel crew')).status, 409);
  // One script of its own, or another script beside Latin, or symbols: a name like any other.
  for (const name of [
    '\u0410\u0434\u043c\u0438\u043d\u0438\u0441\u0442\u0440\u0430\u0442\u043e\u0440',
    '\u0394\u03ad\u03bb\u03c4\u03b1',
    'Team \u6771\u4eac',
    'Ops \u{1F6A2} 24/7',
    'Caf\u00e9 d\u2019\u00e9t\u00e9',
  ]) {
    const r = await post(name);
    t.is(r.status, 201, `${name}: ${r.text}`);
    t.is(r.body.data.name, name);
  }
  // A rename follows the same rules.
  const role = (await post('Spotless')).body.data;
  const rename = (name: string) => s.request('PATCH', `/v1/roles/${role.id}`, { token: admin.token, body: { name } });
  t.is((await rename('Spot\u200bless')).status, 400);
  t.is((await rename('Sp\u043etless')).status, 400);
  t.is((await rename('\uFF21DMIN')).status, 409);
  t.is((await s.db('roles').where('id', role.id).first('name')).name, 'Spotless');
  // None of the look-alikes was stored.
  const tried = [...invisible, '\u0410dmin', '\u0391dmin', '\uFF21\uFF44\uFF4D\uFF49\uFF4E', '\uFF21DMIN'];
  t.deepEqual(await s.db('roles').whereIn('name', tried).pluck('name'), []);
});

test('variants of one name (case, NFD, full-width) created at once make one role; the others are 409', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  for (let round = 0; round < 3; round++) {
    const spellings = [
      `Caf\u00e9 ${round}`,
      `CAFE\u0301 ${round}`,
      `\uFF23\uFF41\uFF46\u00e9 ${round}`,
      `\uFF43\uFF41\uFF46\uFF45\u0301 ${round}`,
      `caf\u00e9\u3000${round}`,
      `C\uFF21F\u00c9 ${round}`,
    ];
    const answers = await Promise.all(
      spellings.map((name) => s.request('POST', '/v1/roles', { token: admin.token, body: { name } })),
    );
    t.deepEqual(
      answers.map((r) => r.status).sort(),
      [201, ...spellings.slice(1).map(() => 409)],
      answers.map((r) => r.text).join('\n'),
    );
    for (const r of answers.filter((a) => a.status === 409)) t.regex(r.body.message, /name/);
  }
});

test('roles: create, rename, 409 on a taken name, system roles cannot be renamed or deleted', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const made = await s.request('POST', '/v1/roles', {
    token: admin.token,
    body: { name: 'Dispatcher', description: 'Plans trips', requires_two_factor: true },
  });
  t.is(made.status, 201, made.text);
  const role = made.body.data;
  t.is(role.name, 'Dispatcher');
  t.true(role.requires_two_factor);
  t.false(role.is_system);
  t.is((await s.request('POST', '/v1/roles', { token: admin.token, body: { name: 'dispatcher' } })).status, 409);
  t.is((await s.request('POST', '/v1/roles', { token: admin.token, body: { description: 'no name' } })).status, 400);

  const patched = await s.request('PATCH', `/v1/roles/${role.id}`, {
    token: admin.token,
    body: { name: 'Dispatch Lead', requires_two_factor: false },
  });
  t.is(patched.status, 200);
  t.is(patched.body.data.name, 'Dispatch Lead');
  t.false(patched.body.data.requires_two_factor);
  t.is(patched.body.data.description, 'Plans trips');
  // All fields optional: {} changes nothing and answers the role.
  const same = await s.request('PATCH', `/v1/roles/${role.id}`, { token: admin.token, body: {} });
  t.is(same.status, 200, same.text);
  t.deepEqual(same.body.data, patched.body.data);
  t.is((await s.request('PATCH', `/v1/roles/${role.id}`, { token: admin.token, body: { name: 'Admin' } })).status, 409);

  const rename = await s.request('PATCH', '/v1/roles/role_moderator', { token: admin.token, body: { name: 'Mods' } });
  t.is(rename.status, 403);
  t.regex(rename.body.message, /system roles cannot be renamed/);
  const sysDesc = await s.request('PATCH', '/v1/roles/role_moderator', {
    token: admin.token,
    body: { description: 'Keeps order', requires_two_factor: true },
  });
  t.is(sysDesc.status, 200);
  t.is(sysDesc.body.data.name, 'Moderator');
  t.true(sysDesc.body.data.requires_two_factor);
  // roles:write without holding what a role grants changes nothing of it (API Full Access is not *:*).
  const operator = await createUser(s.db, { roles: ['role_api_full_access'] });
  const adminRole = await s.db('roles').where('id', 'role_admin').first('description', 'requires_two_factor');
  const loosen = await s.request('PATCH', '/v1/roles/role_admin', {
    token: operator.token,
    body: { description: 'pwned', requires_two_factor: false },
  });
  t.is(loosen.status, 403, loosen.text);
  t.regex(loosen.body.message, /cannot manage a role granting permissions you do not hold/);
  t.deepEqual(await s.db('roles').where('id', 'role_admin').first('description', 'requires_two_factor'), adminRole);
  t.is(
    (await s.request('PATCH', `/v1/roles/${role.id}`, { token: operator.token, body: { description: 'Mine now' } }))
      .status,
    200,
  );

  const delSystem = await s.request('DELETE', '/v1/roles/role_moderator', { token: admin.token });
  t.is(delSystem.status, 403);
  t.regex(delSystem.body.message, /system roles cannot be deleted/);
  const del = await s.request('DELETE', `/v1/roles/${role.id}`, { token: admin.token });
  t.is(del.status, 204);
  t.is(del.text, '');
  t.is((await s.request('GET', `/v1/roles/${role.id}`, { token: admin.token })).status, 404);
  t.is((await s.request('DELETE', `/v1/roles/${role.id}`, { token: admin.token })).status, 404);
});

test('role permissions: 201 with the current list, 409 when assigned, 204 and 404 on removal', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const role = (await s.request('POST', '/v1/roles', { token: admin.token, body: { name: 'Viewer' } })).body.data;
  const gpsRead = await permId('gps:read');
  const tripsRead = await permId('trips:read');
  const a = await s.request('POST', `/v1/roles/${role.id}/permissions`, {
    token: admin.token,
    body: { permission_id: gpsRead },
  });
  t.is(a.status, 201, a.text);
  t.deepEqual(
    a.body.data.map((p: { id: string }) => p.id),
    [gpsRead],
  );
  const b = await s.request('POST', `/v1/roles/${role.id}/permissions`, {
    token: admin.token,
    body: { permission_id: tripsRead },
  });
  t.deepEqual(
    b.body.data.map((p: { resource: string; action: string }) => `${p.resource}:${p.action}`),
    ['gps:read', 'trips:read'],
  );
  t.is(
    (
      await s.request('POST', `/v1/roles/${role.id}/permissions`, {
        token: admin.token,
        body: { permission_id: gpsRead },
      })
    ).status,
    409,
  );
  // A permission the body names that does not exist is bad input; an unknown role in the path is a 404.
  const nope = await s.request('POST', `/v1/roles/${role.id}/permissions`, {
    token: admin.token,
    body: { permission_id: '00000000-0000-4000-8000-000000000000' },
  });
  t.is(nope.status, 400);
  t.like(nope.body, { error: 'BadRequest', message: 'permission_id: no such permission' });
  t.is(
    (
      await s.request('POST', `/v1/roles/role_nope/permissions`, {
        token: admin.token,
        body: { permission_id: gpsRead },
      })
    ).status,
    404,
  );
  t.is(
    (await s.request('POST', `/v1/roles/${role.id}/permissions`, { token: admin.token, body: { permission_id: 'x' } }))
      .status,
    400,
  );
  const list = await s.request('GET', `/v1/roles/${role.id}/permissions`, { token: admin.token });
  t.is(list.body.data.length, 2);
  t.is((await s.request('DELETE', `/v1/roles/${role.id}/permissions/${gpsRead}`, { token: admin.token })).status, 204);
  t.is((await s.request('DELETE', `/v1/roles/${role.id}/permissions/${gpsRead}`, { token: admin.token })).status, 404);
  t.deepEqual(
    (await s.request('GET', `/v1/roles/${role.id}/permissions`, { token: admin.token })).body.data.map(
      (p: { id: string }) => p.id,
    ),
    [tripsRead],
  );
});

test('role escalation: a roles:write holder cannot grant a permission they lack (403)', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const managerRole = (await s.request('POST', '/v1/roles', { token: admin.token, body: { name: 'Role Manager' } }))
    .body.data;
  for (const p of ['roles:read', 'roles:write', 'gps:read']) {
    t.is(
      (
        await s.request('POST', `/v1/roles/${managerRole.id}/permissions`, {
          token: admin.token,
          body: { permission_id: await permId(p) },
        })
      ).status,
      201,
    );
  }
  const manager = await createUser(s.db, { roles: [managerRole.id] });
  const target = (await s.request('POST', '/v1/roles', { token: manager.token, body: { name: 'Target' } })).body.data;
  const esc = await s.request('POST', `/v1/roles/${target.id}/permissions`, {
    token: manager.token,
    body: { permission_id: await permId('users:delete') },
  });
  t.is(esc.status, 403);
  t.regex(esc.body.message, /users:delete/);
  const star = await s.request('POST', `/v1/roles/${managerRole.id}/permissions`, {
    token: manager.token,
    body: { permission_id: await permId('*:*') },
  });
  t.is(star.status, 403);
  t.is(
    (
      await s.request('POST', `/v1/roles/${target.id}/permissions`, {
        token: manager.token,
        body: { permission_id: await permId('gps:read') },
      })
    ).status,
    201,
  );
  t.false((await mePermissions(manager.token)).includes('users:delete'));
});

test('permissions: list, get, create with format checks and 409', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const list = await s.request('GET', '/v1/permissions', { token: dev.token });
  t.is(list.status, 200);
  t.true(list.body.data.some((p: { resource: string; action: string }) => p.resource === 'gps' && p.action === 'read'));
  t.deepEqual(Object.keys(list.body.data[0]).sort(), [
    'action',
    'created_at',
    'description',
    'id',
    'resource',
    'updated_at',
  ]);
  const id = await permId('gps:read');
  t.is((await s.request('GET', `/v1/permissions/${id}`, { token: dev.token })).body.data.id, id);
  t.is(
    (await s.request('GET', '/v1/permissions/00000000-0000-4000-8000-000000000000', { token: dev.token })).status,
    404,
  );
  t.is(
    (await s.request('POST', '/v1/permissions', { token: dev.token, body: { resource: 'reports', action: 'read' } }))
      .status,
    403,
  );
  const made = await s.request('POST', '/v1/permissions', {
    token: admin.token,
    body: { resource: 'reports', action: 'read', description: 'Read reports' },
  });
  t.is(made.status, 201);
  t.is(made.body.data.resource, 'reports');
  t.is(
    (await s.request('POST', '/v1/permissions', { token: admin.token, body: { resource: 'reports', action: 'read' } }))
      .status,
    409,
  );
  const bad = await s.request('POST', '/v1/permissions', {
    token: admin.token,
    body: { resource: 'Re ports', action: 'read' },
  });
  t.is(bad.status, 400);
  t.regex(bad.body.message, /resource/);
});

test.serial(
  'a role-permission change is visible on the very next request, and within a second on another api instance',
  async (t) => {
    const s = stack();
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    const role = (await s.request('POST', '/v1/roles', { token: admin.token, body: { name: 'Cache Probe' } })).body
      .data;
    const user = await createUser(s.db, { roles: ['role_user', role.id] });
    const key = await createKey({ userId: null, scopes: [] });
    await s.db('api_key_roles').insert({ api_key_id: key.id, role_id: role.id });
    const second = await startSecondApi(s);
    const otherUrl = second.url;
    try {
      // Warm the caches of both instances.
      t.false((await mePermissions(user.token)).includes('settings:write'));
      t.false((await mePermissions(user.token, otherUrl)).includes('settings:write'));
      t.false((await mePermissions(key.key)).includes('settings:write'));
      t.false((await mePermissions(key.key, otherUrl)).includes('settings:write'));

      const add = await s.request('POST', `/v1/roles/${role.id}/permissions`, {
        token: admin.token,
        body: { permission_id: await permId('settings:write') },
      });
      t.is(add.status, 201);
      t.true((await mePermissions(user.token)).includes('settings:write'));
      t.true((await mePermissions(key.key)).includes('settings:write'));
      const deadline = Date.now() + 1000;
      let seen = false;
      while (!seen && Date.now() < deadline) {
        seen =
          (await mePermissions(user.token, otherUrl)).includes('settings:write') &&
          (await mePermissions(key.key, otherUrl)).includes('settings:write');
        if (!seen) await new Promise((r) => setTimeout(r, 20));
      }
      t.true(seen, 'second instance still served the old permission set after 1 s');

      // Removal works the same way, and deleting the role takes its grants away.
      t.is(
        (
          await s.request('DELETE', `/v1/roles/${role.id}/permissions/${await permId('settings:write')}`, {
            token: admin.token,
          })
        ).status,
        204,
      );
      t.false((await mePermissions(user.token)).includes('settings:write'));
      await s.request('POST', `/v1/roles/${role.id}/permissions`, {
        token: admin.token,
        body: { permission_id: await permId('settings:delete') },
      });
      t.true((await mePermissions(user.token)).includes('settings:delete'));
      t.is((await s.request('DELETE', `/v1/roles/${role.id}`, { token: admin.token })).status, 204);
      t.false((await mePermissions(user.token)).includes('settings:delete'));
      t.false((await mePermissions(key.key)).includes('settings:delete'));
    } finally {
      await second.close();
    }
  },
);

test('role changes push rolePermissionsChanged to holders, permissionsUpdated / rolesUpdated only where something changed', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const role = (await s.request('POST', '/v1/roles', { token: admin.token, body: { name: 'Push Probe' } })).body.data;
  const holder = await createUser(s.db, { roles: ['role_user', role.id] });
  const outsider = await createUser(s.db, { roles: ['role_user'] });
  const holderPushes = await listenPushes(s.redis, s.config, `user:${holder.id}`);
  const outsiderPushes = await listenPushes(s.redis, s.config, `user:${outsider.id}`);
  try {
    // two_factor:read: the holder has it already through User, so the effective set does not change.
    await s.request('POST', `/v1/roles/${role.id}/permissions`, {
      token: admin.token,
      body: { permission_id: await permId('two_factor:read') },
    });
    const changed1 = await holderPushes.waitFor((m) => m.type === 'rolePermissionsChanged');
    t.is(changed1.roleId, role.id);
    t.is(changed1.roleName, 'Push Probe');
    await new Promise((r) => setTimeout(r, 100));
    t.false(holderPushes.messages.some((m) => m.type === 'permissionsUpdated'));

    await s.request('POST', `/v1/roles/${role.id}/permissions`, {
      token: admin.token,
      body: { permission_id: await permId('gps:write') },
    });
    const updated = await holderPushes.waitFor((m) => m.type === 'permissionsUpdated');
    t.is(updated.userId, holder.id);
    t.true(updated.permissions.includes('gps:write'));
    t.is(holderPushes.messages.filter((m) => m.type === 'rolePermissionsChanged').length, 2);

    await s.request('PATCH', `/v1/roles/${role.id}`, { token: admin.token, body: { name: 'Push Probe 2' } });
    const renamed = await holderPushes.waitFor((m) => m.type === 'rolesUpdated');
    t.true(renamed.roles.includes('Push Probe 2'));
    t.true(renamed.roleIds.includes(role.id));

    const del = await s.request('DELETE', `/v1/roles/${role.id}`, { token: admin.token });
    t.is(del.status, 204, del.text);
    const gone = await holderPushes.waitFor((m) => m.type === 'rolesUpdated' && !m.roleIds.includes(role.id));
    t.deepEqual(gone.roleIds, ['role_user']);
    const lost = await holderPushes.waitFor(
      (m) => m.type === 'permissionsUpdated' && !m.permissions.includes('gps:write'),
    );
    t.false(lost.permissions.includes('gps:write'));
    t.is(outsiderPushes.messages.length, 0);
  } finally {
    holderPushes.close();
    outsiderPushes.close();
  }
});

test.serial(
  'a role held by more users than a statement takes parameters can be changed; one invalidation',
  async (t) => {
    const s = stack();
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    const role = (await s.request('POST', '/v1/roles', { token: admin.token, body: { name: 'Crowd' } })).body.data;
    // 66,000 holders: one bind parameter per holder would overflow PostgreSQL's 65,535.
    await s.db.raw(`INSERT INTO users (username) SELECT 'crowd_' || g FROM generate_series(1, 66000) g`);
    await s.db.raw(
      `INSERT INTO user_roles (user_id, role_id) SELECT id, ? FROM users WHERE username LIKE 'crowd\\_%'`,
      [role.id],
    );
    const holder = await createUser(s.db, { roles: [role.id] });
    t.false((await mePermissions(holder.token)).includes('gps:read'));
    const pushes = await listenPushes(s.redis, s.config, `user:${holder.id}`);
    const invalidations = await listenInvalidations(s.redis, s.config);
    try {
      const added = await s.request('POST', `/v1/roles/${role.id}/permissions`, {
        token: admin.token,
        body: { permission_id: await permId('gps:read') },
      });
      t.is(added.status, 201, added.text);
      // The holder hears of it, and holds it on the very next request.
      const push = await pushes.waitFor((m) => m.type === 'permissionsUpdated', 10_000);
      t.deepEqual(push.permissions, ['gps:read']);
      t.true((await mePermissions(holder.token)).includes('gps:read'));
      const renamed = await s.request('PATCH', `/v1/roles/${role.id}`, {
        token: admin.token,
        body: { name: 'Throng' },
      });
      t.is(renamed.status, 200, renamed.text);
      await pushes.waitFor((m) => m.type === 'rolesUpdated' && m.roles.includes('Throng'), 10_000);
      // Each change dropped the cached credentials with one message, not one per holder.
      t.deepEqual(
        invalidations.messages.map((m) => m.all),
        [true, true],
      );
    } finally {
      pushes.close();
      invalidations.close();
    }
  },
);

test('roles are listed by name without regard to case, as every list by name is', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const tag = Date.now().toString(36);
  for (const name of [`zz ${tag} beta`, `ZZ ${tag} Gamma`, `zz ${tag} alpha`]) {
    const r = await s.request('POST', '/v1/roles', { token: admin.token, body: { name } });
    t.is(r.status, 201, r.text);
  }
  const names = (await s.request('GET', '/v1/roles', { token: admin.token })).body.data
    .map((r: { name: string }) => r.name)
    .filter((n: string) => n.toLowerCase().startsWith(`zz ${tag}`));
  // Byte order would put `ZZ … Gamma` first.
  t.deepEqual(names, [`zz ${tag} alpha`, `zz ${tag} beta`, `ZZ ${tag} Gamma`]);
});

test.serial("a new role description drops only its holders' cached credentials, not everyone's", async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const [a, b] = [await createUser(s.db), await createUser(s.db)];
  const held = (await s.request('POST', '/v1/roles', { token: admin.token, body: { name: `Held ${Date.now()}` } })).body
    .data;
  const unheld = (await s.request('POST', '/v1/roles', { token: admin.token, body: { name: `Unheld ${Date.now()}` } }))
    .body.data;
  for (const u of [a, b])
    t.is(
      (await s.request('POST', `/v1/users/${u.id}/roles`, { token: admin.token, body: { role_id: held.id } })).status,
      201,
    );
  const heard = await listenInvalidations(s.redis, s.config);
  try {
    const patch = (id: string, description: string) =>
      s.request('PATCH', `/v1/roles/${id}`, { token: admin.token, body: { description } });
    t.is((await patch(held.id, 'described')).status, 200);
    t.is((await patch(unheld.id, 'nobody holds it')).status, 200);
    await new Promise((r) => setTimeout(r, 100));
    const messages = heard.messages.map(({ ackId: _a, ackTo: _t, ...m }) => ({
      ...m,
      userIds: [...(m.userIds ?? [])].sort(),
    }));
    // One message, naming the two holders: no `all`, nothing for the role nobody holds.
    t.deepEqual(messages, [{ userIds: [a.id, b.id].sort() }], JSON.stringify(heard.messages));
  } finally {
    heard.close();
  }
  // The holders see the new description on their next request.
  const roles = await s.request('GET', `/v1/users/${a.id}/roles`, { token: a.token });
  t.is(roles.body.roles.find((r: { id: string }) => r.id === held.id).description, 'described');
});
