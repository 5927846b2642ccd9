import test from 'ava';
import { sha256 } from '../../shared/crypto';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

const base = { name: 'Fleet App', redirect_uris: ['https://fleet.example/callback'], allowed_scopes: ['gps:read'] };

async function roleWith(perms: string[]): Promise<string> {
  const s = stack();
  const id = `role_t_${Math.random().toString(36).slice(2, 10)}`;
  await s.db('roles').insert({ id, name: id });
  for (const p of perms) {
    const [resource, action] = p.split(':');
    const perm = await s.db('permissions').where({ resource, action }).first('id');
    await s.db('role_permissions').insert({ role_id: id, permission_id: perm.id });
  }
  return id;
}

test('create: 201 with the secret shown once and stored hashed; audit client_created', async (t) => {
  const s = stack();
  const owner = await createUser(s.db);
  const r = await s.request('POST', '/v1/oauth/clients', {
    token: owner.token,
    body: {
      ...base,
      description: 'tracks boats',
      homepage_url: 'https://fleet.example',
      logo_url: 'https://fleet.example/logo.png',
      privacy_policy_url: 'https://fleet.example/privacy',
      terms_of_service_url: 'https://fleet.example/tos',
    },
  });
  t.is(r.status, 201, r.text);
  t.deepEqual(Object.keys(r.body).sort(), ['client', 'client_secret']);
  t.deepEqual(Object.keys(r.body.client).sort(), ['client_type', 'id', 'is_active', 'name']);
  t.is(r.body.client.client_type, 'confidential');
  t.true(r.body.client.is_active);
  t.regex(r.body.client_secret, /^ocs_/);
  const row = await s.db('oauth_clients').where('id', r.body.client.id).first();
  t.is(row.client_secret_hash, sha256(r.body.client_secret));
  t.is(row.user_id, owner.id);

  const got = await s.request('GET', `/v1/oauth/clients/${r.body.client.id}`, { token: owner.token });
  t.is(got.status, 200);
  t.false(JSON.stringify(got.body).includes(r.body.client_secret));
  t.false('client_secret_hash' in got.body.data);
  for (const k of [
    'id',
    'name',
    'description',
    'logo_url',
    'homepage_url',
    'privacy_policy_url',
    'terms_of_service_url',
    'redirect_uris',
    'allowed_scopes',
    'client_type',
    'is_active',
    'is_first_party',
    'created_at',
    'updated_at',
  ])
    t.true(k in got.body.data, k);
  t.deepEqual(got.body.data.redirect_uris, base.redirect_uris);

  const audit = await s
    .db('audit_events')
    .where({ event_type: 'client_created', resource_id: r.body.client.id })
    .first();
  t.is(audit.user_id, owner.id);

  const pub = await s.request('POST', '/v1/oauth/clients', {
    token: owner.token,
    body: { ...base, client_type: 'public' },
  });
  t.is(pub.status, 201);
  t.is(pub.body.client_secret, null);
  t.is(pub.body.client.client_type, 'public');
  t.is((await s.request('POST', '/v1/oauth/clients', { body: base })).status, 401);
});

test('a client name shown on the consent screen cannot hide characters or mix look-alike scripts (400 naming name)', async (t) => {
  const s = stack();
  const owner = await createUser(s.db);
  const post = (name: string) =>
    s.request('POST', '/v1/oauth/clients', { token: owner.token, body: { ...base, name } });
  for (const [name, message] of [
    ['Fleet\u200bApp', /^name: must not contain invisible or formatting characters \(U\+200B\)$/],
    ['\u202eppA teelF', /^name: must not contain invisible or formatting characters \(U\+202E\)$/],
    ['G\u043e\u043egle', /^name: must not mix letters of different scripts \(Latin and Cyrillic\)$/],
  ] as const) {
    const r = await post(name);
    t.is(r.status, 400, name);
    t.regex(r.body.message, message);
  }
  const made = await post('\u041f\u043e\u0433\u043e\u0434\u0430 \u{1F6A2}');
  t.is(made.status, 201, made.text);
  const renamed = await s.request('PATCH', `/v1/oauth/clients/${made.body.client.id}`, {
    token: owner.token,
    body: { name: 'Fleet\u00adApp' },
  });
  t.is(renamed.status, 400, renamed.text);
  t.regex(renamed.body.message, /^name: must not contain invisible or formatting characters \(U\+00AD\)$/);
  t.is((await s.db('oauth_clients').where('id', made.body.client.id).first('name')).name, made.body.client.name);
});
test('redirect URIs: absolute https, or http only on localhost / 127.0.0.1', async (t) => {
  const s = stack();
  const owner = await createUser(s.db);
  for (const uri of [
    'https://app.example/cb',
    'http://localhost:3000/cb',
    'http://127.0.0.1/callback',
    'https://app.example/cb?x=1',
  ]) {
    const r = await s.request('POST', '/v1/oauth/clients', {
      token: owner.token,
      body: { ...base, redirect_uris: [uri] },
    });
    t.is(r.status, 201, `${uri}: ${r.text}`);
  }
  for (const uri of [
    'http://app.example/cb',
    '/relative/cb',
    'myapp://cb',
    'https://app.example/cb#frag',
    'ftp://localhost/cb',
    'http://localhost.evil.example/cb',
    'javascript:alert(1)',
    'https://user:pw@app.example/cb',
    '',
  ]) {
    const r = await s.request('POST', '/v1/oauth/clients', {
      token: owner.token,
      body: { ...base, redirect_uris: [uri] },
    });
    t.is(r.status, 400, uri);
    t.regex(r.body.message, /redirect_uris/, uri);
  }
  t.is(
    (await s.request('POST', '/v1/oauth/clients', { token: owner.token, body: { ...base, redirect_uris: [] } })).status,
    400,
  );
  const made = (await s.request('POST', '/v1/oauth/clients', { token: owner.token, body: base })).body;
  t.is(
    (
      await s.request('PATCH', `/v1/oauth/clients/${made.client.id}`, {
        token: owner.token,
        body: { redirect_uris: ['http://app.example/cb'] },
      })
    ).status,
    400,
  );
});

test('owner-or-admin: others get 403; oauth_clients permissions and super admins may act; /all for admins', async (t) => {
  const s = stack();
  const owner = await createUser(s.db);
  const stranger = await createUser(s.db);
  const reader = await createUser(s.db, { roles: ['role_user', await roleWith(['oauth_clients:read'])] });
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const made = (await s.request('POST', '/v1/oauth/clients', { token: owner.token, body: base })).body;
  const id = made.client.id;
  await s.request('POST', '/v1/oauth/clients', { token: stranger.token, body: { ...base, name: 'Stranger App' } });

  const mine = await s.request('GET', '/v1/oauth/clients', { token: owner.token });
  t.deepEqual(
    mine.body.data.map((c: { id: string }) => c.id),
    [id],
  );
  t.is((await s.request('GET', `/v1/oauth/clients/${id}`, { token: stranger.token })).status, 403);
  t.is(
    (await s.request('PATCH', `/v1/oauth/clients/${id}`, { token: stranger.token, body: { name: 'x' } })).status,
    403,
  );
  t.is((await s.request('DELETE', `/v1/oauth/clients/${id}`, { token: stranger.token })).status, 403);
  t.is((await s.request('POST', `/v1/oauth/clients/${id}/regenerate-secret`, { token: stranger.token })).status, 403);

  t.is((await s.request('GET', `/v1/oauth/clients/${id}`, { token: reader.token })).status, 200);
  t.is((await s.request('PATCH', `/v1/oauth/clients/${id}`, { token: reader.token, body: { name: 'x' } })).status, 403);
  t.is(
    (await s.request('PATCH', `/v1/oauth/clients/${id}`, { token: admin.token, body: { name: 'Renamed by admin' } }))
      .status,
    200,
  );

  t.is((await s.request('GET', '/v1/oauth/clients/all', { token: owner.token })).status, 403);
  const all = await s.request('GET', '/v1/oauth/clients/all?limit=100', { token: reader.token });
  t.is(all.status, 200);
  t.true(all.body.data.length >= 2);
  t.true(all.body.data.some((c: { id: string }) => c.id === id));
  t.is(all.body.pagination.limit, 100);
  t.is(
    (await s.request('GET', '/v1/oauth/clients/00000000-0000-4000-8000-000000000000', { token: admin.token })).status,
    404,
  );
  t.is((await s.request('GET', '/v1/oauth/clients/not-a-uuid', { token: admin.token })).status, 400);
});

test('oauth_clients:write does not take over the client of someone who holds more (hierarchy)', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  // API Full Access holds oauth_clients:write, not *:*.
  const operator = await createUser(s.db, { roles: ['role_api_full_access'] });
  const plain = await createUser(s.db);
  const adminApp = (
    await s.request('POST', '/v1/oauth/clients', { token: admin.token, body: { ...base, name: 'Admin App' } })
  ).body.client.id;
  const plainApp = (
    await s.request('POST', '/v1/oauth/clients', { token: plain.token, body: { ...base, name: 'Plain App' } })
  ).body.client.id;
  const evil = { redirect_uris: ['https://evil.example/cb'], allowed_scopes: ['*:*'] };
  const patched = await s.request('PATCH', `/v1/oauth/clients/${adminApp}`, { token: operator.token, body: evil });
  t.is(patched.status, 403, patched.text);
  t.regex(patched.body.message, /^you may only change clients of users whose every permission you hold/);
  t.is(
    (await s.request('POST', `/v1/oauth/clients/${adminApp}/regenerate-secret`, { token: operator.token })).status,
    403,
  );
  t.is((await s.request('DELETE', `/v1/oauth/clients/${adminApp}`, { token: operator.token })).status, 403);
  t.deepEqual(
    (await s.db('oauth_clients').where('id', adminApp).first('redirect_uris')).redirect_uris,
    base.redirect_uris,
  );
  // The client of a user who holds less is still theirs to change, and the administrator changes anyone's.
  t.is(
    (await s.request('PATCH', `/v1/oauth/clients/${plainApp}`, { token: operator.token, body: { name: 'Renamed' } }))
      .status,
    200,
  );
  t.is(
    (await s.request('PATCH', `/v1/oauth/clients/${adminApp}`, { token: admin.token, body: { name: 'Mine' } })).status,
    200,
  );
});

test("a client without an owner (the system's) is changed only by a holder of every permission", async (t) => {
  // An ownerless client (an install's first-party app, registered by an operator): whoever rewrote
  // its redirect URIs would receive the codes of everyone who signs in through it, administrators
  // included. Routes never create one (the system key may not register clients); the rule fails
  // closed for those that exist.
  const s = stack();
  const operator = await createUser(s.db, { roles: ['role_api_full_access'] });
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const row = await s
    .db('oauth_clients')
    .insert({
      name: 'Web',
      redirect_uris: JSON.stringify(base.redirect_uris),
      allowed_scopes: JSON.stringify(['gps:read']),
      client_type: 'public',
    })
    .returning('id');
  const id = row[0].id;
  const evil = { redirect_uris: ['https://evil.example/cb'] };
  const patched = await s.request('PATCH', `/v1/oauth/clients/${id}`, { token: operator.token, body: evil });
  t.is(patched.status, 403, patched.text);
  t.regex(patched.body.message, /without an owner/);
  t.is((await s.request('POST', `/v1/oauth/clients/${id}/regenerate-secret`, { token: operator.token })).status, 403);
  t.is((await s.request('DELETE', `/v1/oauth/clients/${id}`, { token: operator.token })).status, 403);
  t.deepEqual((await s.db('oauth_clients').where('id', id).first('redirect_uris')).redirect_uris, base.redirect_uris);
  // Reading it is still the permission's; the administrator (*:*) changes it.
  t.is((await s.request('GET', `/v1/oauth/clients/${id}`, { token: operator.token })).status, 200);
  const r = await s.request('PATCH', `/v1/oauth/clients/${id}`, { token: admin.token, body: { name: 'Web app' } });
  t.is(r.status, 200, r.text);
});

test('PATCH updates given fields and audits; only admins may mark a client first-party', async (t) => {
  const s = stack();
  const owner = await createUser(s.db);
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  t.is(
    (await s.request('POST', '/v1/oauth/clients', { token: owner.token, body: { ...base, is_first_party: true } }))
      .status,
    403,
  );
  const id = (await s.request('POST', '/v1/oauth/clients', { token: owner.token, body: base })).body.client.id;
  const p = await s.request('PATCH', `/v1/oauth/clients/${id}`, {
    token: owner.token,
    body: { description: 'new', allowed_scopes: ['gps:read', 'trips:read'] },
  });
  t.is(p.status, 200, p.text);
  t.is(p.body.data.description, 'new');
  t.is(p.body.data.name, 'Fleet App');
  t.deepEqual(p.body.data.allowed_scopes, ['gps:read', 'trips:read']);
  // All fields optional: {} changes nothing and answers the client.
  const same = await s.request('PATCH', `/v1/oauth/clients/${id}`, { token: owner.token, body: {} });
  t.is(same.status, 200, same.text);
  t.deepEqual(same.body.data, p.body.data);
  t.is(
    (await s.request('PATCH', `/v1/oauth/clients/${id}`, { token: owner.token, body: { is_first_party: true } }))
      .status,
    403,
  );
  const fp = await s.request('PATCH', `/v1/oauth/clients/${id}`, {
    token: admin.token,
    body: { is_first_party: true },
  });
  t.true(fp.body.data.is_first_party);
  t.truthy(await s.db('audit_events').where({ event_type: 'client_updated', resource_id: id }).first());
});

test('regenerate-secret: new secret shown once, old hash replaced; public clients have none', async (t) => {
  const s = stack();
  const owner = await createUser(s.db);
  const made = (await s.request('POST', '/v1/oauth/clients', { token: owner.token, body: base })).body;
  const r = await s.request('POST', `/v1/oauth/clients/${made.client.id}/regenerate-secret`, { token: owner.token });
  t.is(r.status, 200);
  t.deepEqual(Object.keys(r.body).sort(), ['client_id', 'client_secret', 'message']);
  t.is(r.body.client_id, made.client.id);
  t.not(r.body.client_secret, made.client_secret);
  t.is(
    (await s.db('oauth_clients').where('id', made.client.id).first()).client_secret_hash,
    sha256(r.body.client_secret),
  );
  t.truthy(
    await s.db('audit_events').where({ event_type: 'client_secret_regenerated', resource_id: made.client.id }).first(),
  );
  const pub = (
    await s.request('POST', '/v1/oauth/clients', { token: owner.token, body: { ...base, client_type: 'public' } })
  ).body;
  t.is(
    (await s.request('POST', `/v1/oauth/clients/${pub.client.id}/regenerate-secret`, { token: owner.token })).status,
    400,
  );
});

test('delete: 204, gone afterwards, audited', async (t) => {
  const s = stack();
  const owner = await createUser(s.db);
  const id = (await s.request('POST', '/v1/oauth/clients', { token: owner.token, body: base })).body.client.id;
  const d = await s.request('DELETE', `/v1/oauth/clients/${id}`, { token: owner.token });
  t.is(d.status, 204);
  t.is((await s.request('GET', `/v1/oauth/clients/${id}`, { token: owner.token })).status, 404);
  t.is((await s.request('DELETE', `/v1/oauth/clients/${id}`, { token: owner.token })).status, 404);
  t.truthy(await s.db('audit_events').where({ event_type: 'client_deleted', resource_id: id }).first());
});
