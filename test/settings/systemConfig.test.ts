import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { seed } from '../../shared/seed';
import { SYSTEM_CONFIG } from '../../shared/systemConfig';
import { createUser, TestUser } from '../helpers/factories';
import { startSecondApi } from '../helpers/secondApi';
import { useStack } from '../helpers/stack';
import { gpsBody, once } from '../helpers/tracking';
import { eventually, sleep } from '../helpers/wait';

/**
 * System config (spec §4.9): seeded entries of the registry (shared/systemConfig.ts), list with a
 * prefix filter, get, PATCH validated against each key's declared type, and changes reaching the
 * config cache of every running api instance through Redis pub/sub.
 */
/** The repository (this file runs from dist/test/settings). */
const REPO = join(__dirname, '../../..');
const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' } });
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

test('every declared key is seeded with its default, and nothing undeclared is', async (t) => {
  const rows: Array<{ key: string; value: unknown }> = await stack().db('system_config').select('key', 'value');
  t.deepEqual(rows.map((r) => r.key).sort(), Object.keys(SYSTEM_CONFIG).sort());
  for (const [key, e] of Object.entries(SYSTEM_CONFIG)) t.true(e.schema.safeParse(e.default).success, key);
  const { admin } = await users();
  const audit = (await req('GET', '/v1/system-config/audit.retention_days', admin)).body.data;
  t.like(audit, { key: 'audit.retention_days', value: 365 });
  t.is((await req('GET', '/v1/system-config/accounts.deletion_grace_days', admin)).body.data.value, 7);
  // Keys that were declared and never read are gone (migration 20261203000000_unread_config_keys).
  t.is((await req('GET', '/v1/system-config/export.rate_limit_per_hour', admin)).status, 404);
  t.is((await req('PATCH', '/v1/system-config/ais.enabled', admin, { value: false })).status, 404);
});

// Serial (AVA runs serial tests before the others): it sets gps.retention_days to 30 for a moment,
// which a concurrent test reading the default would see.
test.serial(
  "each entry's description is the registry's, also over a row a migration wrote with other words",
  async (t) => {
    const s = stack();
    const { admin } = await users();
    const described = async () =>
      new Map(
        ((await req('GET', '/v1/system-config', admin)).body as Array<{ key: string; description: string }>).map(
          (e) => [e.key, e.description],
        ),
      );
    const now = await described();
    for (const [key, e] of Object.entries(SYSTEM_CONFIG)) t.is(now.get(key), e.description, key);
    // A value an operator set stays; a description (which nothing but the code writes) follows the code.
    await s.db('system_config').where('key', 'gps.retention_days').update({ description: 'old words', value: '30' });
    await seed(s.db);
    const row = await s.db('system_config').where('key', 'gps.retention_days').first('value', 'description');
    t.is(row.value, 30);
    t.is(row.description, SYSTEM_CONFIG['gps.retention_days'].description);
    await s.db('system_config').where('key', 'gps.retention_days').update({ value: '365' });
  },
);

test('every declared key is read by the service (ui.* keys are for clients)', (t) => {
  // A key nothing reads answers PATCH with 200 and changes nothing: three such keys shipped once.
  const roots = ['api', 'shared', 'workers', 'realtime', 'scripts'].map((d) => join(REPO, d));
  const sources: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') && !p.endsWith(join('shared', 'systemConfig.ts')))
        sources.push(readFileSync(p, 'utf8'));
    }
  };
  roots.forEach(walk);
  for (const key of Object.keys(SYSTEM_CONFIG)) {
    if (key.startsWith('ui.')) continue;
    t.true(
      sources.some((text) => text.includes(`'${key}'`)),
      `${key} is declared in shared/systemConfig.ts but no code reads it`,
    );
  }
});

test('list: a bare array by key, filtered by prefix', async (t) => {
  const { developer } = await users();
  const all = await req('GET', '/v1/system-config', developer);
  t.is(all.status, 200);
  t.true(Array.isArray(all.body));
  const keys = all.body.map((e: { key: string }) => e.key);
  t.deepEqual(keys, [...keys].sort());
  t.deepEqual(Object.keys(all.body[0]).sort(), ['description', 'key', 'updated_at', 'value']);
  const gps = await req('GET', '/v1/system-config?prefix=gps.', developer);
  t.deepEqual(
    gps.body.map((e: { key: string }) => e.key),
    ['gps.latest_cache_seconds', 'gps.retention_days'],
  );
  const auth = await req('GET', '/v1/system-config?prefix=auth.', developer);
  t.true(auth.body.length >= 2 && auth.body.every((e: { key: string }) => e.key.startsWith('auth.')));
  // LIKE wildcards in the prefix are literal.
  t.deepEqual((await req('GET', '/v1/system-config?prefix=%25', developer)).body, []);
  t.deepEqual((await req('GET', '/v1/system-config?prefix=gps_', developer)).body, []);
});

test('get: an entry, 404 for an unknown key', async (t) => {
  const { developer } = await users();
  const r = await req('GET', '/v1/system-config/trips.default_gps_logging', developer);
  t.is(r.status, 200);
  t.like(r.body.data, { key: 'trips.default_gps_logging', value: false });
  t.truthy(r.body.data.description);
  const missing = await req('GET', '/v1/system-config/no.such.key', developer);
  t.is(missing.status, 404);
  t.is(missing.body.error, 'NotFound');
});

test('PATCH sets a value of each declared type; wrong types and ranges are 400 naming value', async (t) => {
  const { admin } = await users();
  const patch = (key: string, body: unknown) => req('PATCH', `/v1/system-config/${key}`, admin, body);
  const before = (await req('GET', '/v1/system-config/ui.maintenance_mode', admin)).body.data.updated_at;
  // boolean
  const bool = await patch('ui.maintenance_mode', { value: true });
  t.is(bool.status, 200, bool.text);
  t.like(bool.body.data, { key: 'ui.maintenance_mode', value: true });
  t.true(bool.body.data.updated_at > before);
  // integer
  t.is((await patch('audit.retention_days', { value: 30 })).body.data.value, 30);
  t.is((await patch('accounts.deletion_grace_days', { value: 14 })).body.data.value, 14);
  await patch('accounts.deletion_grace_days', { value: 7 });
  // array of strings
  t.deepEqual((await patch('auth.supported_locales', { value: ['en', 'de', 'fr'] })).body.data.value, [
    'en',
    'de',
    'fr',
  ]);
  t.deepEqual((await req('GET', '/v1/system-config/auth.supported_locales', admin)).body.data.value, [
    'en',
    'de',
    'fr',
  ]);
  await patch('auth.supported_locales', { value: ['en', 'de'] });

  const bad: Array<[string, unknown, RegExp]> = [
    ['ui.maintenance_mode', 'yes', /^value: must be a boolean/],
    ['audit.retention_days', '30', /^value: must be an integer/],
    ['audit.retention_days', 1.5, /^value: must be an integer/],
    ['audit.retention_days', -1, /^value: must be >= 0/],
    ['accounts.deletion_grace_days', 0, /^value: must be >= 1/],
    ['gps.latest_cache_seconds', null, /^value: /],
    ['auth.supported_locales', [], /^value: must not be empty/],
    ['auth.supported_locales', ['en', 7], /^value\.1: /],
    ['auth.supported_locales', 'en', /^value: /],
  ];
  for (const [key, value, message] of bad) {
    const r = await patch(key, { value });
    t.is(r.status, 400, `${key} ${JSON.stringify(value)}`);
    t.is(r.body.error, 'BadRequest');
    t.regex(r.body.message, message);
  }
  t.is((await req('GET', '/v1/system-config/audit.retention_days', admin)).body.data.value, 30);
  t.regex((await patch('audit.retention_days', {})).body.message, /^value: is required/);
  t.is((await patch('audit.retention_days', { value: 5, description: 'x' })).status, 400);
  const audit = await stack()
    .db('audit_events')
    .where({ event_type: 'system_config_updated', resource_id: 'audit.retention_days' });
  t.true(audit.length >= 1);
  t.deepEqual(audit[0].metadata, { key: 'audit.retention_days', old_value: 365, new_value: 30 });
});

test('no create or delete; unknown keys are 404', async (t) => {
  const { admin } = await users();
  const r = await req('PATCH', '/v1/system-config/made.up.key', admin, { value: 1 });
  t.is(r.status, 404);
  t.is(r.body.error, 'NotFound');
  t.is((await req('POST', '/v1/system-config', admin, { key: 'x.y', value: 1 })).status, 405);
  t.is((await req('DELETE', '/v1/system-config/ui.maintenance_mode', admin)).status, 405);
});

test('permissions: settings:read lists and gets, settings:write patches', async (t) => {
  const { developer, user } = await users();
  t.is((await req('GET', '/v1/system-config', undefined)).status, 401);
  t.is((await req('GET', '/v1/system-config', user)).status, 403);
  t.is((await req('GET', '/v1/system-config/gps.retention_days', user)).status, 403);
  t.is((await req('PATCH', '/v1/system-config/gps.retention_days', developer, { value: 1 })).status, 403);
  t.is((await req('GET', '/v1/system-config/gps.retention_days', developer)).body.data.value, 365);
});

// Serial: it starts a second api instance.
test.serial('a PATCH reaches the config cache of another api instance within a second', async (t) => {
  const s = stack();
  const { admin } = await users();
  const second = await startSecondApi(s);
  const ttlAfterPostOnSecond = async (device: string) => {
    const res = await fetch(`${second.url}/v1/gps`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(gpsBody({ device_id: device })),
    });
    if (res.status !== 201) throw new Error(`POST /v1/gps → ${res.status}`);
    return s.redis.ttl(`${s.config.redisPrefix}gps:latest:device:${device}`);
  };
  try {
    // The second instance reads gps.latest_cache_seconds once and keeps it cached.
    t.true((await ttlAfterPostOnSecond('cfg-a')) > 250);
    // A change behind the service's back (no publish) is not seen, even after a while: the cache
    // lives until a change is published, it is not re-read on a timer.
    await s
      .db('system_config')
      .where('key', 'gps.latest_cache_seconds')
      .update({ value: JSON.stringify(42) });
    await sleep(1500);
    t.true((await ttlAfterPostOnSecond('cfg-b')) > 250);
    // A PATCH on the first instance is seen by the second within a second (eventually fails after it).
    const patched = await req('PATCH', '/v1/system-config/gps.latest_cache_seconds', admin, { value: 77 });
    t.is(patched.status, 200);
    let n = 0;
    await eventually(async () => (await ttlAfterPostOnSecond(`cfg-c${n++}`)) <= 77, 1000, 10);
  } finally {
    await req('PATCH', '/v1/system-config/gps.latest_cache_seconds', admin, { value: 300 });
    await second.close();
  }
});
