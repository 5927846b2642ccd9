import test from 'ava';
import { createUser, TestUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { once } from '../helpers/tracking';

/** Settings (spec §4.9, decisions.md): CRUD by key, the public list, validation and permissions. */
const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000' } });
const users = once(async () => {
  const s = stack();
  return {
    admin: await createUser(s.db, { roles: ['role_admin'] }),
    developer: await createUser(s.db, { roles: ['role_developer'] }),
    user: await createUser(s.db, { roles: ['role_user'] }),
  };
});
const req = (method: string, path: string, who: TestUser | undefined, body?: unknown) =>
  stack().request(method, path, { token: who?.token, body });

test('create, read, replace and delete a setting; any JSON value', async (t) => {
  const { admin, developer } = await users();
  const made = await req('POST', '/v1/settings', admin, {
    key: 'app.theme',
    value: { primary: '#123456', dark: true },
    description: 'Theme of the web app',
    is_public: true,
  });
  t.is(made.status, 201, made.text);
  t.is(made.headers.get('location'), '/v1/settings/app.theme');
  t.like(made.body.data, { key: 'app.theme', value: { primary: '#123456', dark: true }, is_public: true });
  t.deepEqual(Object.keys(made.body.data).sort(), ['description', 'is_public', 'key', 'updated_at', 'value']);
  t.is(made.body._links.self, '/v1/settings/app.theme');

  const got = await req('GET', '/v1/settings/app.theme', developer);
  t.is(got.status, 200);
  t.deepEqual(got.body.data, made.body.data);

  for (const value of ['plain text', 42, false, null, [1, 'two', { three: 3 }]]) {
    const put = await req('PUT', '/v1/settings/app.theme', admin, { value, is_public: true });
    t.is(put.status, 200, put.text);
    t.deepEqual(put.body.data.value, value);
    t.deepEqual((await req('GET', '/v1/settings/app.theme', admin)).body.data.value, value);
  }
  // PUT replaces: an omitted description is cleared, an omitted is_public is false.
  const replaced = await req('PUT', '/v1/settings/app.theme', admin, { value: 'x' });
  t.is(replaced.body.data.description, null);
  t.is(replaced.body.data.is_public, false);

  const list = await req('GET', '/v1/settings', developer);
  t.is(list.status, 200);
  t.true(list.body.data.some((x: { key: string }) => x.key === 'app.theme'));

  const audit = await stack().db('audit_events').where({ resource_type: 'setting', resource_id: 'app.theme' });
  t.deepEqual(audit.map((a) => a.event_type).sort()[0], 'setting_created');
  t.is((await req('DELETE', '/v1/settings/app.theme', admin)).status, 204);
  // The audit list filters by the types settings record (the spec's list has none for them).
  for (const type of ['setting_created', 'setting_updated', 'setting_deleted']) {
    const r = await req('GET', `/v1/admin/audit?event_type=${type}&limit=100`, admin);
    t.is(r.status, 200, r.text);
    t.true(
      r.body.events.some((e: { resource_id: string }) => e.resource_id === 'app.theme'),
      type,
    );
  }
  t.is((await req('GET', '/v1/settings/app.theme', admin)).status, 404);
});

test('409 when the key exists, 404 for a missing key on GET, PUT and DELETE', async (t) => {
  const { admin } = await users();
  t.is((await req('POST', '/v1/settings', admin, { key: 'dup.key', value: 1 })).status, 201);
  const again = await req('POST', '/v1/settings', admin, { key: 'dup.key', value: 2 });
  t.is(again.status, 409);
  t.is(again.body.error, 'Conflict');
  t.is((await req('GET', '/v1/settings/dup.key', admin)).body.data.value, 1);
  for (const [method, body] of [
    ['GET', undefined],
    ['PUT', { value: 1 }],
    ['DELETE', undefined],
  ] as const) {
    const r = await req(method, '/v1/settings/no.such.key', admin, body);
    t.is(r.status, 404, method);
    t.is(r.body.error, 'NotFound');
  }
});

test('keys and bodies are validated with a 400 naming the field', async (t) => {
  const { admin } = await users();
  const bad = [
    [{ key: '', value: 1 }, /^key: /],
    [{ key: 'a'.repeat(101), value: 1 }, /^key: /],
    [{ key: 'has space', value: 1 }, /^key: /],
    [{ key: '.dot-first', value: 1 }, /^key: /],
    [{ key: 'public', value: 1 }, /^key: /],
    // GET /v1/settings/Public would answer the public list, never this setting.
    [{ key: 'Public', value: 1 }, /^key: public is reserved/],
    [{ key: 'PUBLIC', value: 1 }, /^key: /],
    [{ key: 'ok.key' }, /^value: /],
    [{ key: 'ok.key', value: 1, is_public: 'yes' }, /^is_public: /],
    [{ key: 'ok.key', value: 1, description: 5 }, /^description: /],
    // 64 KiB as JSON at most: the quotes count.
    [{ key: 'ok.key', value: 'x'.repeat(64 * 1024 - 1) }, /^value: must be at most 64 KiB as JSON/],
  ] as const;
  for (const [body, message] of bad) {
    const r = await req('POST', '/v1/settings', admin, body);
    t.is(r.status, 400, JSON.stringify(body));
    t.regex(r.body.message, message);
  }
  t.is((await req('GET', `/v1/settings/${'x'.repeat(101)}`, admin)).status, 400);
  t.regex((await req('PUT', '/v1/settings/ok.key', admin, {})).body.message, /^value: /);
  // The largest value that fits is stored whole.
  const largest = 'x'.repeat(64 * 1024 - 2);
  t.is((await req('POST', '/v1/settings', admin, { key: 'largest', value: largest })).status, 201);
  t.is((await req('GET', '/v1/settings/largest', admin)).body.data.value, largest);
});

test('the public list shows only public settings, without authentication', async (t) => {
  const { admin } = await users();
  await req('POST', '/v1/settings', admin, { key: 'pub.motd', value: 'Ahoy', is_public: true });
  await req('POST', '/v1/settings', admin, { key: 'priv.secretish', value: 'internal' });
  const r = await stack().request('GET', '/v1/settings/public');
  t.is(r.status, 200);
  const keys = r.body.data.map((x: { key: string }) => x.key);
  t.true(keys.includes('pub.motd'));
  t.false(keys.includes('priv.secretish'));
  t.true(r.body.data.every((x: { is_public: boolean }) => x.is_public));
});

test('permissions: settings:read to read, settings:write to write, settings:delete to delete', async (t) => {
  const { admin, developer, user } = await users();
  await req('POST', '/v1/settings', admin, { key: 'perm.probe', value: 1 });
  t.is((await req('GET', '/v1/settings', undefined)).status, 401);
  t.is((await req('GET', '/v1/settings', user)).status, 403);
  t.is((await req('GET', '/v1/settings/perm.probe', user)).status, 403);
  // Developer holds settings:read only.
  t.is((await req('GET', '/v1/settings/perm.probe', developer)).status, 200);
  t.is((await req('POST', '/v1/settings', developer, { key: 'perm.other', value: 1 })).status, 403);
  t.is((await req('PUT', '/v1/settings/perm.probe', developer, { value: 2 })).status, 403);
  t.is((await req('DELETE', '/v1/settings/perm.probe', developer)).status, 403);
  t.is((await req('GET', '/v1/settings/perm.probe', admin)).body.data.value, 1);
});
