import test from 'ava';
import { sha256 } from '../../shared/crypto';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { statementsOn } from '../helpers/statements';

const stack = useStack(test);
const ME = { query: '{ me { userId apiKeyId permissions } }' };

async function me(token: string) {
  return stack().request('POST', '/v1/gql', { token, body: ME });
}

test('create: 201 with the key shown once, stored as sha256 with its prefix; audit api_key_created', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const expires = new Date(Date.now() + 86400_000).toISOString();
  const r = await s.request('POST', '/v1/api-keys', {
    token: user.token,
    body: { name: 'CI', description: 'builds', scopes: ['gps:read', 'trips:read', 'gps:read'], expires_at: expires },
  });
  t.is(r.status, 201, r.text);
  for (const k of ['id', 'key', 'name', 'scopes', 'expires_at']) t.true(k in r.body, k);
  t.deepEqual(r.body.scopes, ['gps:read', 'trips:read']);
  t.is(r.body.expires_at, expires);
  t.regex(r.body.key, /^sk_/);
  const row = await s.db('api_keys').where('id', r.body.id).first();
  t.is(row.key_hash, sha256(r.body.key));
  t.is(row.key_prefix, r.body.key.slice(0, 12));
  t.is(row.user_id, user.id);

  // The key works, narrowed to its scopes; it is never shown again.
  const m = await me(r.body.key);
  t.is(m.body.data.me.apiKeyId, r.body.id);
  t.deepEqual(m.body.data.me.permissions, ['gps:read', 'trips:read']);
  const got = await s.request('GET', `/v1/api-keys/${r.body.id}`, { token: user.token });
  t.is(got.status, 200);
  t.false('key' in got.body.data);
  t.false(JSON.stringify(got.body).includes(r.body.key));
  t.is(got.body.data.key_prefix, r.body.key.slice(0, 12));
  t.deepEqual(Object.keys(got.body.data).sort(), [
    'created_at',
    'description',
    'expires_at',
    'id',
    'is_active',
    'is_system',
    'key_prefix',
    'last_used_at',
    'name',
    'scopes',
    'updated_at',
    'user_id',
  ]);

  const audit = await s.db('audit_events').where({ event_type: 'api_key_created', resource_id: r.body.id }).first();
  t.truthy(audit);
  t.is(audit.user_id, user.id);
  t.false(JSON.stringify(audit).includes(r.body.key));

  t.is(
    (
      await s.request('POST', '/v1/api-keys', {
        token: user.token,
        body: { name: 'x', expires_at: new Date(Date.now() - 1000).toISOString() },
      })
    ).status,
    400,
  );
  t.is(
    (await s.request('POST', '/v1/api-keys', { token: user.token, body: { name: 'x', scopes: ['not a scope'] } }))
      .status,
    400,
  );
  t.is((await s.request('POST', '/v1/api-keys', { body: { name: 'x' } })).status, 401);
  // An offset no clock has (zod's date-time check takes any two digits): named, never "invalid value".
  const offset = await s.request('POST', '/v1/api-keys', {
    token: user.token,
    body: { name: 'x', expires_at: '2099-01-01T00:00:00+25:00' },
  });
  t.is(offset.status, 400);
  t.regex(offset.body.message, /^expires_at: must be an ISO 8601 date-time/);
});

test('scope escalation is refused with 403; super admins are exempt', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  for (const scopes of [['users:delete'], ['gps:read', 'gps:write'], ['*:*'], ['gps:*'], ['roles:write']]) {
    const r = await s.request('POST', '/v1/api-keys', { token: user.token, body: { name: 'esc', scopes } });
    t.is(r.status, 403, JSON.stringify(scopes));
    t.regex(r.body.message, /exceed/);
  }
  t.is(
    await s
      .db('api_keys')
      .where({ user_id: user.id })
      .count('* as n')
      .first()
      .then((r) => Number(r!.n)),
    0,
  );

  // Through PATCH as well.
  const made = await s.request('POST', '/v1/api-keys', {
    token: user.token,
    body: { name: 'ok', scopes: ['gps:read'] },
  });
  const esc = await s.request('PATCH', `/v1/api-keys/${made.body.id}`, {
    token: user.token,
    body: { scopes: ['gps:read', 'users:write'] },
  });
  t.is(esc.status, 403);
  t.deepEqual((await s.db('api_keys').where('id', made.body.id).first()).scopes, ['gps:read']);

  // A key cannot mint a broader key than itself.
  const narrowKey = await createKey({ userId: user.id, scopes: ['api_keys:write', 'gps:read'] });
  const viaKey = await s.request('POST', '/v1/api-keys', {
    token: narrowKey.key,
    body: { name: 'child', scopes: ['trips:read'] },
  });
  t.is(viaKey.status, 403);
  t.is(
    (await s.request('POST', '/v1/api-keys', { token: narrowKey.key, body: { name: 'child', scopes: ['gps:read'] } }))
      .status,
    201,
  );

  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const sa = await s.request('POST', '/v1/api-keys', { token: admin.token, body: { name: 'root', scopes: ['*:*'] } });
  t.is(sa.status, 201);
});

/** Alice and Bob with one key each, and an admin. */
async function twoOwnersAndAnAdmin() {
  const db = stack().db;
  const alice = await createUser(db, { roles: ['role_user', 'role_api_read_only'] });
  const bob = await createUser(db, { roles: ['role_user', 'role_api_read_only'] });
  const admin = await createUser(db, { roles: ['role_admin'] });
  const a = await createKey({ userId: alice.id, scopes: ['gps:read'], name: 'alice key' });
  const b = await createKey({ userId: bob.id, scopes: ['gps:read'], name: 'bob key' });
  return { alice, bob, admin, a, b };
}

test('list and get: callers see their own keys; super admins see all, system keys included', async (t) => {
  const s = stack();
  const { alice, admin, a, b } = await twoOwnersAndAnAdmin();
  const mine = await s.request('GET', '/v1/api-keys', { token: alice.token });
  t.is(mine.status, 200);
  t.deepEqual(
    mine.body.data.map((k: { id: string }) => k.id),
    [a.id],
  );
  t.is((await s.request('GET', `/v1/api-keys/${b.id}`, { token: alice.token })).status, 403);
  t.is(
    (await s.request('GET', '/v1/api-keys/00000000-0000-4000-8000-000000000000', { token: alice.token })).status,
    404,
  );
  const all = await s.request('GET', '/v1/api-keys', { token: admin.token });
  const ids = all.body.data.map((k: { id: string }) => k.id);
  t.true(ids.includes(a.id) && ids.includes(b.id));
  t.true(all.body.data.some((k: { is_system: boolean }) => k.is_system));
  t.is((await s.request('GET', `/v1/api-keys/${b.id}`, { token: admin.token })).status, 200);
  // A key without api_keys:read cannot list.
  t.is((await s.request('GET', '/v1/api-keys', { token: a.key })).status, 403);
});

test('concurrent lists share reads per caller only: each caller gets its own keys, and a new key at once', async (t) => {
  const s = stack();
  const { alice, bob, admin, a, b } = await twoOwnersAndAnAdmin();
  const ids = (r: { body: { data: Array<{ id: string }> } }) => r.body.data.map((k) => k.id);
  // Interleaved, so the lists of all three callers are asked for together.
  const callers = [alice, bob, admin, alice, bob, admin, alice, bob, admin];
  const answers = await Promise.all(callers.map((c) => s.request('GET', '/v1/api-keys', { token: c.token })));
  answers.forEach((r, i) => {
    t.is(r.status, 200);
    const got = ids(r);
    if (callers[i] === alice) t.deepEqual(got, [a.id]);
    else if (callers[i] === bob) t.deepEqual(got, [b.id]);
    else t.true(got.includes(a.id) && got.includes(b.id));
  });
  // A key created just before the next request is in its list.
  const a2 = await createKey({ userId: alice.id, scopes: ['gps:read'], name: 'alice second' });
  const after = await Promise.all([alice, alice].map((c) => s.request('GET', '/v1/api-keys', { token: c.token })));
  for (const r of after) t.deepEqual(ids(r).sort(), [a.id, a2.id].sort());
});

test.serial(
  "lists are cached per caller's scope: a repeat reads no key, and a use, a rename in SQL or a new key shows next time",
  async (t) => {
    const s = stack();
    const { alice, bob, admin, a, b } = await twoOwnersAndAnAdmin();
    type Listed = { id: string; name: string; last_used_at: string | null };
    const list = async (token: string) => {
      const r = await s.request('GET', '/v1/api-keys', { token });
      t.is(r.status, 200);
      return { etag: r.headers.get('etag'), keys: r.body.data as Listed[] };
    };
    const callers = [alice, bob, admin];
    const first = await Promise.all(callers.map((c) => list(c.token)));
    t.deepEqual(
      first[0].keys.map((k) => k.id),
      [a.id],
    );
    t.deepEqual(
      first[1].keys.map((k) => k.id),
      [b.id],
    );
    t.true(first[2].keys.some((k) => k.id === a.id) && first[2].keys.some((k) => k.id === b.id));
    // Three scopes, three answers: no caller is sent another scope's list, nor its ETag.
    t.is(new Set(first.map((f) => f.etag)).size, 3);

    const repeat = await statementsOn(s.db, 'api_keys', () => Promise.all(callers.map((c) => list(c.token))));
    t.is(repeat.count, 0, repeat.sql.join('\n'));
    t.deepEqual(
      repeat.result.map((r) => r.keys),
      first.map((f) => f.keys),
    );

    // A request made with Alice's key is stamped by the batched usage flush; her next list shows it.
    t.is((await me(a.key)).status, 200);
    t.is(first[0].keys[0].last_used_at, null);
    await s.api.services.credentials.flushUsage();
    const used = (await list(alice.token)).keys[0];
    t.truthy(used.last_used_at);

    // A rename typed into the database is seen too (the statement trigger bumps the version).
    await s.db('api_keys').where('id', b.id).update({ name: 'bob renamed in sql' });
    t.is((await list(bob.token)).keys[0].name, 'bob renamed in sql');
    t.true((await list(admin.token)).keys.some((k) => k.name === 'bob renamed in sql'));
    t.deepEqual(
      (await list(alice.token)).keys.map((k) => k.id),
      [a.id],
    );
  },
);

test('PATCH changes only given fields; deactivation and expiry take effect at once', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const made = (
    await s.request('POST', '/v1/api-keys', {
      token: user.token,
      body: { name: 'patch me', scopes: ['gps:read', 'trips:read'] },
    })
  ).body;
  t.is((await me(made.key)).status, 200);
  const p = await s.request('PATCH', `/v1/api-keys/${made.id}`, {
    token: user.token,
    body: { name: 'renamed', scopes: ['gps:read'] },
  });
  t.is(p.status, 200);
  t.is(p.body.data.name, 'renamed');
  t.deepEqual(p.body.data.scopes, ['gps:read']);
  t.deepEqual((await me(made.key)).body.data.me.permissions, ['gps:read']);
  // All fields optional: {} changes nothing and answers the key.
  const same = await s.request('PATCH', `/v1/api-keys/${made.id}`, { token: user.token, body: {} });
  t.is(same.status, 200, same.text);
  // (last_used_at is flushed in batches and may land in between: everything else is the same.)
  const { last_used_at: _a, ...unchanged } = same.body.data;
  const { last_used_at: _b, ...before } = p.body.data;
  t.deepEqual(unchanged, before);

  t.is(
    (await s.request('PATCH', `/v1/api-keys/${made.id}`, { token: user.token, body: { is_active: false } })).status,
    200,
  );
  t.is((await me(made.key)).status, 401);
  t.truthy(await s.db('audit_events').where({ event_type: 'api_key_revoked', resource_id: made.id }).first());
  t.is(
    (await s.request('PATCH', `/v1/api-keys/${made.id}`, { token: user.token, body: { is_active: true } })).status,
    200,
  );
  t.is((await me(made.key)).status, 200);

  // expires_at honoured: a key expiring in a moment stops working when it passes.
  const soon = new Date(Date.now() + 1500).toISOString();
  t.is(
    (await s.request('PATCH', `/v1/api-keys/${made.id}`, { token: user.token, body: { expires_at: soon } })).status,
    200,
  );
  t.is((await me(made.key)).status, 200);
  await new Promise((r) => setTimeout(r, 1700));
  const expired = await me(made.key);
  t.is(expired.status, 401);
  // /v1/gql answers refusals in the GraphQL error format.
  t.regex(expired.body.errors[0].message, /expired/);
  t.is(expired.body.errors[0].extensions.code, 'UNAUTHENTICATED');

  const other = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  t.is(
    (await s.request('PATCH', `/v1/api-keys/${made.id}`, { token: other.token, body: { name: 'mine now' } })).status,
    403,
  );
});

test('regenerate: the old key is dead at once, the new one works; system keys only by super admins', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const made = (
    await s.request('POST', '/v1/api-keys', { token: user.token, body: { name: 'rotate', scopes: ['gps:read'] } })
  ).body;
  t.is((await me(made.key)).status, 200); // cached now
  const r = await s.request('POST', `/v1/api-keys/${made.id}/regenerate`, { token: user.token });
  t.is(r.status, 200, r.text);
  // Exactly the issued-key fields: nothing else of the row (no key_hash) leaves with the secret.
  t.deepEqual(Object.keys(r.body).sort(), [
    'created_at',
    'description',
    'expires_at',
    'id',
    'is_active',
    'key',
    'key_prefix',
    'name',
    'scopes',
  ]);
  const stored = await s.db('api_keys').where('id', made.id).first('key_hash');
  t.false(JSON.stringify(r.body).includes(stored.key_hash));
  t.false(/hash/i.test(r.text));
  t.is(r.body.id, made.id);
  t.not(r.body.key, made.key);
  t.is(r.body.key_prefix, r.body.key.slice(0, 12));
  t.is((await me(made.key)).status, 401);
  const fresh = await me(r.body.key);
  t.is(fresh.status, 200);
  t.is(fresh.body.data.me.apiKeyId, made.id);
  t.truthy(await s.db('audit_events').where({ event_type: 'api_key_revoked', resource_id: made.id }).first());

  const sys = await s.db('api_keys').where('is_system', true).first('id');
  const holder = await createUser(s.db, { roles: ['role_api_full_access'] });
  t.is((await s.request('POST', `/v1/api-keys/${sys.id}/regenerate`, { token: holder.token })).status, 403);
  const other = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  t.is((await s.request('POST', `/v1/api-keys/${made.id}/regenerate`, { token: other.token })).status, 403);

  // A super admin may regenerate a system key; the old system key value then stops working.
  const extraSystem = await createKey({ userId: null, system: true, name: 'extra system' });
  t.is((await s.request('POST', '/v1/gql', { token: extraSystem.key, body: ME })).status, 200);
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const sr = await s.request('POST', `/v1/api-keys/${extraSystem.id}/regenerate`, { token: admin.token });
  t.is(sr.status, 200);
  t.is((await s.request('POST', '/v1/gql', { token: extraSystem.key, body: ME })).status, 401);
  t.true(
    (await s.request('POST', '/v1/gql', { token: sr.body.key, body: { query: '{ me { isSuperAdmin } }' } })).body.data
      .me.isSuperAdmin,
  );
});

test('a regenerated system key value stays revoked: start-up does not store SYSTEM_API_KEY again', async (t) => {
  const s = stack();
  const { ensureSystemApiKey, RetiredSystemKeyError } = await import('../../shared/commands/apiKeys');
  // A second configured system key (the stack's own must keep working for the other tests).
  const value = `sys_${Date.now().toString(36)}_retired_value_for_this_test_only`;
  const id = await ensureSystemApiKey(s.db, value);
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const regen = await s.request('POST', `/v1/api-keys/${id}/regenerate`, { token: admin.token });
  t.is(regen.status, 200, regen.text);
  // The next start: the configured value is refused, and neither comes back nor is added beside the new one.
  const err = await t.throwsAsync(() => ensureSystemApiKey(s.db, value));
  t.true(err instanceof RetiredSystemKeyError);
  t.regex(err!.message, /set SYSTEM_API_KEY to the regenerated key/);
  t.is((await s.request('POST', '/v1/gql', { token: value, body: ME })).status, 401);
  t.is((await s.request('POST', '/v1/gql', { token: regen.body.key, body: ME })).status, 200);
  t.is((await s.db('api_keys').where('key_hash', sha256(value))).length, 0);
  t.is((await s.db('retired_key_hashes').where('api_key_id', id)).length, 1);
  // Another key's old value is not kept: no configuration brings it back.
  const own = await s.request('POST', '/v1/api-keys', { token: admin.token, body: { name: 'not retired' } });
  t.is(own.status, 201, own.text);
  const again = await s.request('POST', `/v1/api-keys/${own.body.id}/regenerate`, { token: admin.token });
  t.is(again.status, 200, again.text);
  t.is((await s.request('POST', '/v1/gql', { token: own.body.key, body: ME })).status, 401);
  t.deepEqual(await s.db('retired_key_hashes').where('api_key_id', own.body.id), []);
});

test('a configured system key shows 4 of its characters, not 12; a row stored with 12 is cut at the next start', async (t) => {
  const s = stack();
  const { ensureSystemApiKey } = await import('../../shared/commands/apiKeys');
  // As short as SYSTEM_API_KEY may be: 12 characters shown would leave 4 to guess beside its hash.
  const value = `Q${Date.now().toString(36)}`.padEnd(16, 'z').slice(0, 16);
  const id = await ensureSystemApiKey(s.db, value);
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const listed = await s.request('GET', '/v1/api-keys?limit=100', { token: admin.token });
  t.is(listed.status, 200, listed.text);
  t.is(listed.body.data.find((k: { id: string }) => k.id === id).key_prefix, value.slice(0, 4));
  await s
    .db('api_keys')
    .where('id', id)
    .update({ key_prefix: value.slice(0, 12) });
  t.is(await ensureSystemApiKey(s.db, value), id);
  t.is((await s.db('api_keys').where('id', id).first()).key_prefix, value.slice(0, 4));
  await s.db('api_keys').where('id', id).delete();
});

test("a system key's scopes, switch and expiry cannot be changed; its name can", async (t) => {
  const s = stack();
  const sys = await createKey({ userId: null, system: true, name: 'patched system', scopes: ['*:*'] });
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  for (const body of [{ scopes: ['users:read'] }, { is_active: false }, { expires_at: '2099-01-01T00:00:00Z' }]) {
    const r = await s.request('PATCH', `/v1/api-keys/${sys.id}`, { token: admin.token, body });
    t.is(r.status, 403, JSON.stringify(body));
    t.regex(r.body.message, /system key/);
  }
  const row = await s.db('api_keys').where('id', sys.id).first();
  t.true(row.is_active);
  t.deepEqual(row.scopes, ['*:*']);
  const renamed = await s.request('PATCH', `/v1/api-keys/${sys.id}`, { token: admin.token, body: { name: 'Web app' } });
  t.is(renamed.status, 200, renamed.text);
  t.is(renamed.body.data.name, 'Web app');
  t.is((await s.request('POST', '/v1/gql', { token: sys.key, body: ME })).status, 200);
});

test('delete: 204 and the key stops working; system keys cannot be deleted', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const made = (
    await s.request('POST', '/v1/api-keys', { token: user.token, body: { name: 'bye', scopes: ['gps:read'] } })
  ).body;
  t.is((await me(made.key)).status, 200);
  const other = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  t.is((await s.request('DELETE', `/v1/api-keys/${made.id}`, { token: other.token })).status, 403);
  const d = await s.request('DELETE', `/v1/api-keys/${made.id}`, { token: user.token });
  t.is(d.status, 204);
  t.is((await me(made.key)).status, 401);
  t.is((await s.request('DELETE', `/v1/api-keys/${made.id}`, { token: user.token })).status, 404);
  const revoked = await s
    .db('audit_events')
    .where({ event_type: 'api_key_revoked', resource_id: made.id })
    .orderBy('created_at', 'desc')
    .first();
  t.is(revoked.metadata.reason, 'deleted');

  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const sys = await s.db('api_keys').where('is_system', true).first('id');
  const ds = await s.request('DELETE', `/v1/api-keys/${sys.id}`, { token: admin.token });
  t.is(ds.status, 403);
  t.regex(ds.body.message, /system keys cannot be deleted/);
  t.truthy(await s.db('api_keys').where('id', sys.id).first());
});

test('key roles: assign only roles you hold (403 otherwise), 409 when assigned, removal 204/404', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_user', 'role_developer'] });
  const key = (await s.request('POST', '/v1/api-keys', { token: dev.token, body: { name: 'roles', scopes: [] } })).body;
  t.deepEqual((await me(key.key)).body.data.me.permissions, []);

  const esc = await s.request('POST', `/v1/api-keys/${key.id}/roles`, {
    token: dev.token,
    body: { role_id: 'role_admin' },
  });
  t.is(esc.status, 403);
  t.regex(esc.body.message, /roles you hold/);
  t.is(
    (
      await s.request('POST', `/v1/api-keys/${key.id}/roles`, {
        token: dev.token,
        body: { role_id: 'role_api_full_access' },
      })
    ).status,
    403,
  );
  const nope = await s.request('POST', `/v1/api-keys/${key.id}/roles`, {
    token: dev.token,
    body: { role_id: 'role_nope' },
  });
  t.is(nope.status, 400);
  t.like(nope.body, { error: 'BadRequest', message: 'role_id: no such role' });
  t.is(
    (
      await s.request('POST', '/v1/api-keys/00000000-0000-4000-8000-000000000000/roles', {
        token: dev.token,
        body: { role_id: 'role_developer' },
      })
    ).status,
    404,
  );

  const ok = await s.request('POST', `/v1/api-keys/${key.id}/roles`, {
    token: dev.token,
    body: { role_id: 'role_developer' },
  });
  t.is(ok.status, 201, ok.text);
  t.deepEqual(
    ok.body.data.map((r: { id: string }) => r.id),
    ['role_developer'],
  );
  t.is(
    (await s.request('POST', `/v1/api-keys/${key.id}/roles`, { token: dev.token, body: { role_id: 'role_developer' } }))
      .status,
    409,
  );
  t.true((await me(key.key)).body.data.me.permissions.includes('gps:write')); // effective at once
  t.deepEqual(
    (await s.request('GET', `/v1/api-keys/${key.id}/roles`, { token: dev.token })).body.data.map(
      (r: { name: string }) => r.name,
    ),
    ['Developer'],
  );

  t.is((await s.request('DELETE', `/v1/api-keys/${key.id}/roles/role_developer`, { token: dev.token })).status, 204);
  t.is((await s.request('DELETE', `/v1/api-keys/${key.id}/roles/role_developer`, { token: dev.token })).status, 404);
  t.deepEqual((await me(key.key)).body.data.me.permissions, []);

  // Super admins may assign any role.
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  t.is(
    (
      await s.request('POST', `/v1/api-keys/${key.id}/roles`, {
        token: admin.token,
        body: { role_id: 'role_api_read_only' },
      })
    ).status,
    201,
  );
  // A key's own role-holding does not let it hand out roles its caller lacks.
  const other = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  t.is(
    (await s.request('POST', `/v1/api-keys/${key.id}/roles`, { token: other.token, body: { role_id: 'role_user' } }))
      .status,
    403,
  );
});

test('last_used_at is recorded by the batched usage flush', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  for (let i = 0; i < 3; i++) t.is((await me(key.key)).status, 200);
  // (The periodic flush may run at any moment; flushing now makes the check deterministic.)
  await s.api.services.credentials.flushUsage();
  const row = await s.db('api_keys').where('id', key.id).first();
  t.truthy(row.last_used_at);
  const listed = await s.request('GET', `/v1/api-keys/${key.id}`, { token: user.token });
  t.is(listed.body.data.last_used_at, new Date(row.last_used_at).toISOString());
});

test('account scopes come to a key by name only: never as a permission of one of its roles', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  // Refused as permissions: a role holding one would hand it to every key given the role.
  for (const [resource, action] of [
    ['account', 'audit'],
    ['account', 'email'],
    ['ws', 'ticket'],
  ]) {
    const r = await s.request('POST', '/v1/permissions', { token: admin.token, body: { resource, action } });
    t.is(r.status, 400, `${resource}:${action} ${r.text}`);
    t.regex(r.body.message, /^resource: .*account scope/);
  }
  t.is(
    (await s.request('POST', '/v1/permissions', { token: admin.token, body: { resource: 'account', action: 'misc' } }))
      .status,
    201,
  );
  // One made before the refusal (in SQL) gives a key nothing through its role.
  const [perm] = await s.db('permissions').insert({ resource: 'account', action: 'audit' }).returning('id');
  const role = (await s.request('POST', '/v1/roles', { token: admin.token, body: { name: 'Audit readers' } })).body
    .data;
  const add = await s.request('POST', `/v1/roles/${role.id}/permissions`, {
    token: admin.token,
    body: { permission_id: perm.id },
  });
  t.is(add.status, 201, add.text);
  const viaRole = (
    await s.request('POST', '/v1/api-keys', { token: admin.token, body: { name: 'via role', scopes: ['users:read'] } })
  ).body;
  t.is(
    (await s.request('POST', `/v1/api-keys/${viaRole.id}/roles`, { token: admin.token, body: { role_id: role.id } }))
      .status,
    201,
  );
  t.is((await s.request('GET', '/v1/users/me/audit', { token: viaRole.key })).status, 403);
  // Named in its own scopes (issued by a session), it works.
  const named = (
    await s.request('POST', '/v1/api-keys', { token: admin.token, body: { name: 'named', scopes: ['account:audit'] } })
  ).body;
  t.is((await s.request('GET', '/v1/users/me/audit', { token: named.key })).status, 200);
});

test('list: the whole list without page and limit; pages with either, newest first, none repeated', async (t) => {
  const s = stack();
  const owner = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  // 25 keys, several made in the same instant (the order's ties are broken by id).
  const stamp = new Date();
  const ids: string[] = [];
  for (let i = 0; i < 25; i++) ids.push((await createKey({ userId: owner.id, name: `fleet ${i}` })).id);
  await s.db('api_keys').whereIn('id', ids.slice(0, 10)).update({ created_at: stamp });
  const list = (q = '') => s.request('GET', `/v1/api-keys${q}`, { token: owner.token });

  const whole = await list();
  t.is(whole.status, 200, whole.text);
  t.false('pagination' in whole.body);
  const order = whole.body.data.map((k: { id: string }) => k.id);
  t.deepEqual([...order].sort(), [...ids].sort());

  const seen: string[] = [];
  for (let page = 1; page <= 3; page++) {
    const r = await list(`?limit=10&page=${page}`);
    t.is(r.status, 200, r.text);
    t.like(r.body.pagination, { page, limit: 10, total: 25, total_pages: 3 });
    t.is(Boolean(r.body._links.next), page < 3);
    seen.push(...r.body.data.map((k: { id: string }) => k.id));
  }
  t.deepEqual(seen, order, 'the pages, one after another, are the whole list in its order');
  // `page` alone: pages of 20.
  const second = await list('?page=2');
  t.like(second.body.pagination, { page: 2, limit: 20, total: 25 });
  t.is(second.body.data.length, 5);
  // Past the end: an empty page with the total; a bad limit is a 400 naming it.
  t.like((await list('?page=9&limit=10')).body, { data: [], pagination: { total: 25 } });
  const bad = await list('?limit=0');
  t.is(bad.status, 400);
  t.regex(bad.body.message, /^limit/);
});

test('expires_at that is no date-time is one problem: not also "must be in the future"', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  for (const expires_at of ['2026-W49-2T10:00:00Z', '2030-06-30T23:59:60Z', '', '10000-01-01T00:00:00Z']) {
    const r = await s.request('POST', '/v1/api-keys', { token: user.token, body: { name: 'x', expires_at } });
    t.is(r.status, 400, r.text);
    t.regex(r.body.message, /^expires_at: /, expires_at);
    t.notRegex(r.body.message, /in the future/, `${expires_at}: ${r.body.message}`);
  }
  const past = await s.request('POST', '/v1/api-keys', {
    token: user.token,
    body: { name: 'x', expires_at: '2020-01-01T00:00:00Z' },
  });
  t.is(past.status, 400);
  t.is(past.body.message, 'expires_at: must be in the future');
});
