import test from 'ava';
import type { Knex } from 'knex';
import Koa from 'koa';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { cachedResponse } from '../../api/responseCache';
import { IndexedRouter } from '../../api/indexedRouter';
import { AppContext, defineRoute } from '../../api/routing';
import { tableVersionTag, tripTrackOf, VERSIONED_TABLES } from '../../shared/caches/tableVersions';
import { z, zUuid } from '../../shared/zod';
import { createUser } from '../helpers/factories';
import { startSecondApi } from '../helpers/secondApi';
import { useStack } from '../helpers/stack';

/**
 * README "Hot paths": whole-table reference lists are served from a per-process serialised copy
 * while the table's trigger-kept version is unchanged; any committed write (through the API, or
 * straight into the database) is seen by every instance on its next request; ETags give 304s.
 */
const stack = useStack(test);

test.serial('a cached list follows every write, on every instance, and answers 304 to its ETag', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const names = async (url: string) => {
    const r = await fetch(`${url}/v1/trip-templates`, { headers: { authorization: `Bearer ${admin.token}` } });
    t.is(r.status, 200);
    return { etag: r.headers.get('etag'), names: ((await r.json()) as Array<{ name: string }>).map((x) => x.name) };
  };
  const second = await startSecondApi(s);
  try {
    const first = await names(s.url);
    t.truthy(first.etag);
    t.deepEqual((await names(second.url)).names, first.names);

    // Unchanged table: the ETag holds and a conditional request gets 304 without a body. (fetch adds
    // `Cache-Control: no-cache` to a conditional request unless the caller sets one.)
    const again = await fetch(`${s.url}/v1/trip-templates`, {
      headers: { authorization: `Bearer ${admin.token}`, 'if-none-match': first.etag!, 'cache-control': 'max-age=0' },
    });
    t.is(again.headers.get('etag'), first.etag);
    t.is(again.status, 304);
    t.is(await again.text(), '');

    // A write through the API on one instance: both see it on their next request.
    const made = await s.request('POST', '/v1/trip-templates', {
      token: admin.token,
      body: { name: 'aaa cached one' },
    });
    t.is(made.status, 201);
    const afterApi = await names(second.url);
    t.true(afterApi.names.includes('aaa cached one'));
    t.not(afterApi.etag, first.etag);
    t.true((await names(s.url)).names.includes('aaa cached one'));

    // A write that bypasses the service (an operator's SQL) is seen too: the trigger bumps the version.
    await s.db('trip_templates').where('name', 'aaa cached one').update({ name: 'aab renamed in sql' });
    t.true((await names(s.url)).names.includes('aab renamed in sql'));
    t.true((await names(second.url)).names.includes('aab renamed in sql'));
    const stale = await fetch(`${s.url}/v1/trip-templates`, {
      headers: {
        authorization: `Bearer ${admin.token}`,
        'if-none-match': afterApi.etag!,
        'cache-control': 'max-age=0',
      },
    });
    t.is(stale.status, 200);

    // Access is still decided per request: no permission, no cached body.
    const plain = await createUser(s.db, { roles: [] });
    t.is((await s.request('GET', '/v1/trip-templates', { token: plain.token })).status, 403);
  } finally {
    await second.close();
  }
});

test.serial('roles, permissions and trip categories follow their tables the same way', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const get = (path: string) => s.request('GET', path, { token: admin.token });
  const roles0 = (await get('/v1/roles')).body.data.length;
  await s.db('roles').insert({ id: 'cache_probe', name: 'Cache probe', description: 'x' });
  t.is((await get('/v1/roles')).body.data.length, roles0 + 1);
  const cats0 = (await get('/v1/trip-categories')).body.length;
  t.is(
    (await s.request('POST', '/v1/trip-categories', { token: admin.token, body: { name: 'cached cat' } })).status,
    201,
  );
  t.is((await get('/v1/trip-categories')).body.length, cats0 + 1);
  const perms = (await get('/v1/permissions')).body.data;
  t.true(perms.length > 0);
});

test('the OpenAPI document and Swagger UI files are served from memory with ETags', async (t) => {
  const s = stack();
  for (const path of ['/v1/openapi.json', '/v1/swagger-ui/swagger-ui.css']) {
    const first = await fetch(`${s.url}${path}`);
    t.is(first.status, 200, path);
    const body = await first.text();
    t.true(body.length > 1000, path);
    const etag = first.headers.get('etag');
    t.truthy(etag, path);
    const again = await fetch(`${s.url}${path}`);
    t.is(await again.text(), body, path);
    const conditional = await fetch(`${s.url}${path}`, {
      headers: { 'if-none-match': etag!, 'cache-control': 'max-age=0' },
    });
    t.is(conditional.status, 304, path);
  }
  t.is((await fetch(`${s.url}/v1/swagger-ui/nope.css`)).status, 404);
});

test('answers no cache may keep say so, unless the route validates or caches its own', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  // A new API key's value, the caller's own account, and an error: nothing to store anywhere.
  const key = await s.request('POST', '/v1/api-keys', { token: admin.token, body: { name: 'cc', scopes: [] } });
  t.is(key.status, 201, key.text);
  t.is(key.headers.get('cache-control'), 'no-store');
  const me = await s.request('GET', '/v1/users/me', { token: admin.token });
  t.is(me.headers.get('cache-control'), 'no-store');
  t.is((await s.request('GET', '/v1/users/me')).headers.get('cache-control'), 'no-store');
  // Answers with a validator keep their revalidation; public ones their own lifetime.
  const doc = await s.request('GET', '/v1/openapi.json');
  t.truthy(doc.headers.get('etag'));
  t.not(doc.headers.get('cache-control'), 'no-store');
  t.is((await s.request('GET', '/v1/stats/public')).headers.get('cache-control'), 'public, max-age=60');
});

test.serial('settings lists follow their table: a new setting, and one no longer public', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const keys = async (path: string, token?: string) =>
    ((await s.request('GET', path, { token })).body.data as Array<{ key: string }>).map((x) => x.key);
  t.false((await keys('/v1/settings', admin.token)).includes('cache.probe'));
  t.false((await keys('/v1/settings/public')).includes('cache.probe'));
  const made = await s.request('POST', '/v1/settings', {
    token: admin.token,
    body: { key: 'cache.probe', value: 1, is_public: true },
  });
  t.is(made.status, 201);
  t.true((await keys('/v1/settings', admin.token)).includes('cache.probe'));
  t.true((await keys('/v1/settings/public')).includes('cache.probe'));
  // Straight in the database, as an operator would: the public list drops it on the next request.
  await s.db('settings').where('key', 'cache.probe').update({ is_public: false });
  t.false((await keys('/v1/settings/public')).includes('cache.probe'));
  t.true((await keys('/v1/settings', admin.token)).includes('cache.probe'));
});

test.serial('platforms follow their table; concurrent cached answers share one version read', async (t) => {
  const s = stack();
  const enabled = async () =>
    ((await s.request('GET', '/v1/platforms/enabled')).body.data as Array<{ slug: string }>).map((p) => p.slug);
  const before = await enabled();
  t.true(before.length > 0);
  const slug = before[0];
  t.is((await s.request('GET', `/v1/platforms/${slug}`)).body.data.enabled, true);
  // An operator switches the platform off in SQL: the lists and the single answer follow at once.
  await s.db('platforms').where('slug', slug).update({ enabled: false });
  t.false((await enabled()).includes(slug));
  t.is((await s.request('GET', `/v1/platforms/${slug}`)).body.data.enabled, false);
  const all = (await s.request('GET', '/v1/platforms')).body.data as Array<{ slug: string; enabled: boolean }>;
  t.is(all.find((p) => p.slug === slug)?.enabled, false);
  await s.db('platforms').where('slug', slug).update({ enabled: true });
  t.true((await enabled()).includes(slug));
  t.is((await s.request('GET', '/v1/platforms/no-such-platform')).status, 404);

  // Version reads asked for in the same turn of the event loop (the requests one I/O phase
  // delivers) share one statement.
  const reads: string[] = [];
  const listener = (q: { sql: string }) => {
    if (/from "?table_versions"?/i.test(q.sql)) reads.push(q.sql);
  };
  s.db.on('query', listener);
  try {
    const tags = await Promise.all(
      Array.from({ length: 40 }, (_, i) => tableVersionTag(s.db, i % 2 ? ['platforms'] : ['platforms', 'roles'])),
    );
    t.regex(tags[0], /^platforms:\d+,roles:\d+$/);
    t.regex(tags[1], /^platforms:\d+$/);
  } finally {
    s.db.off('query', listener);
  }
  t.is(reads.length, 1);
});

test.serial(
  'paginated lists declared cacheBy follow their tables on every instance, pages and filters apart',
  async (t) => {
    const s = stack();
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    const second = await startSecondApi(s);
    try {
      const get = async (url: string, path: string) => {
        const r = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${admin.token}` } });
        t.is(r.status, 200, path);
        return (await r.json()) as { data: Array<{ id: string; name?: string }>; pagination: { total: number } };
      };
      const made = {
        trips: (await s.request('POST', '/v1/trips', { token: admin.token, body: { name: 'cache trip' } })).body.data,
        devices: (await s.request('POST', '/v1/devices', { token: admin.token, body: { name: 'cache device' } })).body
          .data,
        locations: (
          await s.request('POST', '/v1/locations', {
            token: admin.token,
            body: { name: 'cache location', latitude: 1, longitude: 2 },
          })
        ).body.data,
        geofences: (
          await s.request('POST', '/v1/geofences', {
            token: admin.token,
            body: { name: 'cache fence', latitude: 1, longitude: 2, radius_km: 1 },
          })
        ).body.data,
      };
      for (const [table, row] of Object.entries(made)) {
        t.truthy(row?.id, table);
        const path = `/v1/${table}?limit=100`;
        const before = await get(s.url, path);
        t.true(
          before.data.some((x) => x.id === row.id),
          table,
        );
        t.is((await get(second.url, path)).pagination.total, before.pagination.total, table);
        // Renamed and then deleted straight in SQL: both instances follow on their next request.
        await s
          .db(table)
          .where('id', row.id)
          .update({ name: `renamed ${table}` });
        for (const url of [s.url, second.url])
          t.is((await get(url, path)).data.find((x) => x.id === row.id)?.name, `renamed ${table}`, table);
        await s.db(table).where('id', row.id).delete();
        for (const url of [s.url, second.url]) {
          const after = await get(url, path);
          t.false(
            after.data.some((x) => x.id === row.id),
            table,
          );
          t.is(after.pagination.total, before.pagination.total - 1, table);
        }
        // Served from the cache: an unchanged table answers its ETag with 304.
        const first = await fetch(`${s.url}${path}`, { headers: { authorization: `Bearer ${admin.token}` } });
        const etag = first.headers.get('etag');
        t.truthy(etag, table);
        const conditional = await fetch(`${s.url}${path}`, {
          headers: { authorization: `Bearer ${admin.token}`, 'if-none-match': etag!, 'cache-control': 'max-age=0' },
        });
        t.is(conditional.status, 304, table);
        // Each page and limit is its own answer.
        t.is((await get(s.url, `/v1/${table}?limit=1`)).data.length, Math.min(1, before.pagination.total - 1), table);
      }

      // A trip's history follows both the trip and the history table; a missing trip is a 404, never cached.
      const trip = (await s.request('POST', '/v1/trips', { token: admin.token, body: { name: 'history trip' } })).body
        .data;
      const history = async () => (await s.request('GET', `/v1/trips/${trip.id}/history`, { token: admin.token })).body;
      t.deepEqual(await history(), []);
      t.is(
        (await s.request('PATCH', `/v1/trips/${trip.id}`, { token: admin.token, body: { status: 'active' } })).status,
        200,
      );
      t.is((await history()).length, 1);
      await s.db('trips').where('id', trip.id).delete();
      t.is((await s.request('GET', `/v1/trips/${trip.id}/history`, { token: admin.token })).status, 404);

      // Users: the live list and the one with deleted users, on both instances.
      const users = async (url: string, q = '') => (await get(url, `/v1/users?limit=1${q}`)).pagination.total;
      const live = await users(s.url);
      const everyone = await users(second.url, '&include_deleted=true');
      const newcomer = await createUser(s.db);
      t.is(await users(second.url), live + 1);
      await s.db('users').where('id', newcomer.id).update({ deleted_at: new Date() });
      t.is(await users(s.url), live);
      t.is(await users(second.url), live);
      t.is(await users(s.url, '&include_deleted=true'), everyone + 1);

      // System config, list and single entry, changed straight in SQL.
      const key = 'geofence.evaluation_enabled';
      const entry = async () =>
        (await s.request('GET', `/v1/system-config/${key}`, { token: admin.token })).body.data.description;
      const listed = async () =>
        (
          (await s.request('GET', '/v1/system-config?prefix=geofence.', { token: admin.token })).body as Array<{
            key: string;
            description: string;
          }>
        ).find((e) => e.key === key)?.description;
      await entry();
      await listed();
      await s.db('system_config').where('key', key).update({ description: 'cache probe description' });
      t.is(await entry(), 'cache probe description');
      t.is(await listed(), 'cache probe description');
      t.is((await s.request('GET', '/v1/system-config/no.such.key', { token: admin.token })).status, 404);

      // OAuth clients (admin list).
      const clients = async () => (await get(s.url, '/v1/oauth/clients/all?limit=100')).pagination.total;
      const n = await clients();
      await s.db('oauth_clients').insert({
        user_id: admin.id,
        name: 'cache probe',
        redirect_uris: JSON.stringify(['https://example.test/cb']),
        client_type: 'public',
      });
      t.is(await clients(), n + 1);
    } finally {
      await second.close();
    }
  },
);

test.serial('misses under a changing version share one build at a time, each as new as its request', async (t) => {
  const s = stack();
  // A cached answer of its own, served by a bare Koa app over the stack's database: its build is
  // held open by a gate, so requests arriving meanwhile are seen waiting: first with the running
  // build's tag, then each after a write, each with a newer tag.
  let builds = 0;
  let open!: () => void;
  let gate = new Promise<void>((resolve) => (open = resolve));
  const app = new Koa();
  app.use(async (ctx) => {
    (ctx as unknown as { services: unknown }).services = { db: s.db };
    await cachedResponse(ctx as unknown as AppContext, ['platforms'], {}, async () => {
      const n = ++builds;
      const version = await tableVersionTag(s.db, ['platforms']);
      if (n === 1 || n === 2) await gate;
      return { body: { n, version } };
    });
  });
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/coalesce-probe`;
  const get = async () => (await (await fetch(url)).json()) as { n: number; version: string };
  const bump = () => s.db.raw('UPDATE platforms SET enabled = enabled WHERE false');
  const until = async (done: () => boolean) => {
    for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
  };
  try {
    // No write while a build runs: requests with its tag share it.
    const cold = [get()];
    await until(() => builds === 1);
    for (let i = 0; i < 4; i++) {
      cold.push(get());
      await new Promise((r) => setTimeout(r, 20));
    }
    open();
    const coldTag = await tableVersionTag(s.db, ['platforms']);
    for (const answer of await Promise.all(cold)) t.deepEqual(answer, { n: 1, version: coldTag });
    t.is(builds, 1);

    await bump();
    gate = new Promise<void>((resolve) => (open = resolve));
    const first = get();
    await until(() => builds === 2);
    const waiting: Array<Promise<{ n: number; version: string }>> = [];
    for (let i = 0; i < 5; i++) {
      await bump();
      waiting.push(get());
      await new Promise((r) => setTimeout(r, 30));
    }
    const newest = await tableVersionTag(s.db, ['platforms']);
    open();
    t.is((await first).n, 2);
    // Five requests, five tags, all newer than the running build: one more build for all of them,
    // started after the last of them asked, so each sees every write made before it asked.
    for (const answer of await Promise.all(waiting)) t.deepEqual(answer, { n: 3, version: newest });
    t.is(builds, 3);
    // Kept under the newest tag: nothing changed since, so the next request is answered as it is.
    t.deepEqual(await get(), { n: 3, version: newest });
    t.is(builds, 3);
    await bump();
    t.is((await get()).n, 4);
  } finally {
    server.close();
  }
});

test('every versioned table has its trigger, and writers on different shards do not wait for each other', async (t) => {
  const s = stack();
  const triggers = (
    await s.db.raw<{ rows: Array<{ table: string }> }>(
      `SELECT c.relname AS table FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
        JOIN pg_proc p ON p.oid = g.tgfoid WHERE p.proname = 'bump_table_version' AND NOT g.tgisinternal`,
    )
  ).rows.map((r) => r.table);
  t.deepEqual([...new Set(triggers)].sort(), [...VERSIONED_TABLES].sort());

  // Two writing transactions of devices on backends whose pids fall on different shards: the second
  // commits while the first is still open (with one version row it would wait for the first).
  const conns: Array<{ trx: Knex.Transaction; pid: number }> = [];
  const spare: Knex.Transaction[] = [];
  try {
    while (conns.length < 2) {
      const trx = await s.db.transaction();
      const { rows } = await trx.raw<{ rows: Array<{ pid: number }> }>('SELECT pg_backend_pid() AS pid');
      // A backend on the first one's shard is held aside (so the pool hands out another one).
      if (conns.some((c) => c.pid % 16 === rows[0].pid % 16)) spare.push(trx);
      else conns.push({ trx, pid: rows[0].pid });
    }
    for (const trx of spare.splice(0)) await trx.rollback();
    const before = await tableVersionTag(s.db, ['devices']);
    await conns[0].trx('devices').insert({ name: 'shard one' });
    await conns[1].trx.raw("SET LOCAL lock_timeout = '2s'");
    await conns[1].trx('devices').insert({ name: 'shard two' });
    await conns[1].trx.commit();
    const mid = await tableVersionTag(s.db, ['devices']);
    t.not(mid, before);
    await conns[0].trx.commit();
    t.not(await tableVersionTag(s.db, ['devices']), mid);
  } finally {
    for (const trx of [...conns.map((c) => c.trx), ...spare]) if (!trx.isCompleted()) await trx.rollback();
  }
});

test('cacheBy is refused on routes whose answer depends on the caller', (t) => {
  const router = new IndexedRouter();
  const def = { method: 'get' as const, summary: 'x', tags: ['x'], cacheBy: ['trips'] as const };
  t.throws(
    () =>
      defineRoute(
        router as never,
        { ...def, path: '/v1/x/:id', auth: { permission: 'trips:read', self: 'id' } },
        () => undefined,
      ),
    { message: /cacheBy needs a GET with a plain permission rule/ },
  );
  t.throws(() => defineRoute(router as never, { ...def, path: '/v1/y', auth: { own: 'trips:read' } }, () => undefined));
  // A per-caller variant only refines a cached answer.
  t.throws(
    () =>
      defineRoute(
        router as never,
        { method: 'get', summary: 'x', tags: ['x'], path: '/v1/t', auth: 'public', cacheVariant: () => 'all' },
        () => undefined,
      ),
    { message: /cacheVariant needs cacheBy/ },
  );
  t.throws(() => defineRoute(router as never, { ...def, path: '/v1/users/me', auth: 'public' }, () => undefined));
  t.throws(() =>
    defineRoute(router as never, { ...def, method: 'post', path: '/v1/z', auth: 'public' }, () => undefined),
  );
  t.throws(
    () =>
      defineRoute(
        router as never,
        { ...def, path: '/v1/w', auth: 'public', cacheBy: ['sessions' as never] },
        () => undefined,
      ),
    { message: /sessions has no version trigger/ },
  );
  // A keyed version takes its key from a validated path parameter of the route.
  const idParams = z.object({ id: zUuid() });
  t.throws(
    () =>
      defineRoute(
        router as never,
        { ...def, path: '/v1/v/:id', auth: 'public', params: idParams, cacheBy: [tripTrackOf('trip')] },
        () => undefined,
      ),
    { message: /trip_track needs a validated path parameter :trip/ },
  );
  t.throws(
    () =>
      defineRoute(
        router as never,
        { ...def, path: '/v1/u/:id', auth: 'public', cacheBy: [tripTrackOf('id')] },
        () => undefined,
      ),
    { message: /trip_track needs a validated path parameter :id/ },
  );
});
