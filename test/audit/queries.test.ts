import test from 'ava';
import { randomUUID } from 'node:crypto';
import { findAuditPage } from '../../shared/queries/audit';
import { createKey, createUser, TestUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { once } from '../helpers/tracking';

const stack = useStack(test);

let admin: TestUser;
let alice: TestUser;
let bob: TestUser;
const day = (n: number) => new Date(Date.UTC(2026, 0, n, 12));

/** A known set of events: alice 6, bob 3, one bot event with an external user id. */
const seed = once(async () => {
  const s = stack();
  admin = await createUser(s.db, { roles: ['role_admin'] });
  alice = await createUser(s.db, { username: `alice_${randomUUID().slice(0, 8)}` });
  bob = await createUser(s.db, { email: `bob.${randomUUID().slice(0, 8)}@searchable.test` });
  const row = (o: Record<string, unknown>) => ({ status: 'success', source_service: 'api', metadata: '{}', ...o });
  await s
    .db('audit_events')
    .insert([
      row({ user_id: alice.id, event_type: 'login', resource_type: 'session', created_at: day(1) }),
      row({ user_id: alice.id, event_type: 'login_failed', status: 'failure', error_message: 'x', created_at: day(2) }),
      row({ user_id: alice.id, event_type: 'api_key_created', resource_type: 'api_key', created_at: day(3) }),
      row({ user_id: alice.id, event_type: 'logout', resource_type: 'session', created_at: day(4) }),
      row({ user_id: alice.id, event_type: 'login', resource_type: 'session', created_at: day(5), is_reported: true }),
      row({ user_id: alice.id, event_type: 'user_updated', resource_type: 'user', created_at: day(6) }),
      row({ user_id: bob.id, event_type: 'login', resource_type: 'session', created_at: day(2) }),
      row({ user_id: bob.id, event_type: 'login_failed', status: 'failure', created_at: day(3) }),
      row({ user_id: bob.id, event_type: 'client_created', resource_type: 'oauth_client', created_at: day(7) }),
      row({ user_id: 'chat:123', event_type: 'bot_command_executed', source_service: 'chat_bot', created_at: day(8) }),
    ]);
});

const get = (path: string, token = admin.token) => stack().request('GET', path, { token });
const types = (r: { body: { events: Array<{ event_type: string }> } }) => r.body.events.map((e) => e.event_type);

test('/v1/users/me/audit: my events only, newest first, in the spec shape with links', async (t) => {
  await seed();
  const r = await get('/v1/users/me/audit?limit=4', alice.token);
  t.is(r.status, 200, r.text);
  t.deepEqual(Object.keys(r.body).sort(), ['_links', 'events', 'limit', 'page', 'total_count', 'total_pages']);
  t.is(r.body.total_count, 6);
  t.is(r.body.total_pages, 2);
  t.is(r.body.page, 1);
  t.is(r.body.limit, 4);
  t.deepEqual(types(r), ['user_updated', 'login', 'logout', 'api_key_created']);
  t.true(r.body.events.every((e: { user_id: string }) => e.user_id === alice.id));
  t.regex(r.body._links.next, /page=2/);
  t.is(r.body._links.prev, undefined);
  const two = await get(r.body._links.next, alice.token);
  t.deepEqual(types(two), ['login_failed', 'login']);
  t.is((await get('/v1/users/me/audit')).body.total_count, 0);
  t.is((await stack().request('GET', '/v1/users/me/audit')).status, 401);
});

test('my activity log is account data: an API key needs account:audit in its grant', async (t) => {
  await seed();
  const s = stack();
  // A tracker's key (any scope but account:audit) sees no IPs, user agents or sign-in history.
  const narrow = await createKey({ userId: alice.id, scopes: ['gps:read', 'api_keys:read'] });
  for (const [method, path] of [
    ['GET', '/v1/users/me/audit'],
    ['GET', '/v1/users/me/audit/reports'],
  ] as const) {
    const r = await s.request(method, path, { token: narrow.key });
    t.is(r.status, 403, `${path}: ${r.text}`);
    t.regex(r.body.message, /account:audit/);
  }
  const event = (await get('/v1/users/me/audit?limit=1', alice.token)).body.events[0].id as string;
  const report = await s.request('POST', `/v1/users/me/audit/${event}/report`, {
    token: narrow.key,
    body: { reason: 'not_me' },
  });
  t.is(report.status, 403, report.text);
  // Named in the grant, it works; a session needs nothing.
  const granted = await createKey({ userId: alice.id, scopes: ['account:audit'] });
  const mine = await s.request('GET', '/v1/users/me/audit', { token: granted.key });
  t.is(mine.status, 200, mine.text);
  t.is(mine.body.total_count, (await get('/v1/users/me/audit', alice.token)).body.total_count);
});

test('user filters: event_type, resource_type, status; bad values are 400 naming the parameter', async (t) => {
  await seed();
  t.deepEqual(types(await get('/v1/users/me/audit?event_type=login', alice.token)), ['login', 'login']);
  t.is((await get('/v1/users/me/audit?resource_type=session', alice.token)).body.total_count, 3);
  t.deepEqual(types(await get('/v1/users/me/audit?status=failure', alice.token)), ['login_failed']);
  for (const [q, name] of [
    ['event_type=nope', 'event_type'],
    ['status=maybe', 'status'],
    ['limit=101', 'limit'],
    ['page=0', 'page'],
    ['resource_type=', 'resource_type'],
  ]) {
    const r = await get(`/v1/users/me/audit?${q}`, alice.token);
    t.is(r.status, 400, q);
    t.deepEqual(Object.keys(r.body).sort(), ['details', 'error', 'message']);
    t.true(r.body.message.startsWith(`${name}:`), r.body.message);
  }
});

test('/v1/users/{user_id}/audit needs audit:read; unknown user 404', async (t) => {
  await seed();
  const r = await get(`/v1/users/${bob.id}/audit`);
  t.is(r.status, 200, r.text);
  t.deepEqual(types(r), ['client_created', 'login_failed', 'login']);
  t.is((await get(`/v1/users/${bob.id}/audit`, alice.token)).status, 403);
  t.is((await get(`/v1/users/${randomUUID()}/audit`)).status, 404);
  t.is((await get('/v1/users/not-a-uuid/audit')).status, 400);
});

test('/v1/admin/audit: every filter', async (t) => {
  await seed();
  const total = async (q: string) => {
    const r = await get(`/v1/admin/audit?${q}`);
    t.is(r.status, 200, `${q}: ${r.text}`);
    return r.body.total_count as number;
  };
  const users = [alice.id, bob.id, 'chat:123'];
  const mine = async (q: string) => {
    const r = await get(`/v1/admin/audit?limit=100&${q}`);
    t.is(r.status, 200, r.text);
    return r.body.events.filter((e: { user_id: string }) => users.includes(e.user_id)).length;
  };
  t.is(await total(`user_id=${alice.id}`), 6);
  t.is(await total('user_id=chat:123'), 1);
  t.is(await total(`user_search=${alice.username.toUpperCase()}`), 6);
  t.is(await total(`user_search=searchable.test`), 3);
  t.is(await total(`user_search=${bob.id}`), 3);
  t.is(await total(`user_id=${alice.id}&event_type=login`), 2);
  t.is(await total(`user_id=${alice.id}&resource_type=session`), 3);
  t.is(await total(`user_id=${bob.id}&status=failure`), 1);
  t.is(await total('source_service=chat_bot'), 1);
  t.is(await mine('start_date=2026-01-03&end_date=2026-01-05'), 4);
  t.is(await mine('start_date=2026-01-07T00:00:00Z'), 2);
  t.is(await mine('end_date=2026-01-01'), 1);
  t.is(await total(`user_id=${alice.id}&is_reported=true`), 1);
  t.is(await total(`user_id=${alice.id}&is_reported=false`), 5);
  t.is(await mine('event_type=login&start_date=2026-01-02&end_date=2026-01-06'), 2);
});

test.serial(
  '/v1/admin/audit date bounds: millisecond precision, UTC without an offset whatever the time zone',
  async (t) => {
    await seed();
    const s = stack();
    const user = await createUser(s.db);
    // Stored to the microsecond, shown to the millisecond.
    await s.db('audit_events').insert({
      user_id: user.id,
      event_type: 'login',
      status: 'success',
      source_service: 'api',
      metadata: '{}',
      created_at: '2026-01-09T10:00:00.262799Z',
    });
    const count = async (q: string) => {
      const r = await get(`/v1/admin/audit?user_id=${user.id}&${q}`);
      t.is(r.status, 200, r.text);
      return r.body.total_count as number;
    };
    const shown = (await get(`/v1/admin/audit?user_id=${user.id}`)).body.events[0].created_at;
    t.is(shown, '2026-01-09T10:00:00.262Z');
    t.is(await count(`end_date=${shown}`), 1);
    t.is(await count(`start_date=${shown}&end_date=${shown}`), 1);
    t.is(await count('end_date=2026-01-09T10:00:00.261Z'), 0);
    t.is(await count('start_date=2026-01-09T10:00:00.263Z'), 0);
    t.is(await count('end_date=2026-01-09'), 1);
    t.is(await count('start_date=2026-01-10'), 0);
    const zone = process.env.TZ;
    process.env.TZ = 'Europe/Berlin';
    try {
      t.is(new Date('2026-01-09T10:00:00').toISOString(), '2026-01-09T09:00:00.000Z', 'the zone change took');
      t.is(await count('start_date=2026-01-09T10:00:00&end_date=2026-01-09T10:00:00.262'), 1);
      t.is(await count('start_date=2026-01-09T10:00:00.263'), 0);
      t.is(await count('end_date=2026-01-09T10:00'), 0);
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  },
);

test('/v1/admin/audit: a user_search matching hundreds of users counts every one of their events', async (t) => {
  await seed();
  const s = stack();
  const marker = `crowd${Date.now().toString(36)}`;
  // 600 users whose usernames hold the marker, each with one event: more than any list of ids read first.
  // Dated before the other tests' events, which read the newest page.
  await s.db.raw(
    `WITH u AS (INSERT INTO users (username) SELECT ? || '_' || g FROM generate_series(1, 600) g RETURNING id)
     INSERT INTO audit_events (user_id, event_type, created_at) SELECT id::text, 'login', '2025-06-01' FROM u`,
    [marker],
  );
  const r = await get(`/v1/admin/audit?user_search=${marker}&limit=5`);
  t.is(r.status, 200, r.text);
  t.is(r.body.total_count, 600);
  t.is(r.body.events.length, 5);
});

test('/v1/admin/audit: each sort field both ways; bad sort and filter values are 400 naming the parameter', async (t) => {
  await seed();
  const q = `user_search=${alice.username}`;
  const page = async (extra: string) => (await get(`/v1/admin/audit?${q}&${extra}`)).body.events;
  const created = (await page('sort_field=created_at&sort_direction=asc')).map((e: any) => e.created_at);
  t.deepEqual(created, [...created].sort());
  const desc = (await page('')).map((e: any) => e.created_at);
  t.deepEqual(desc, [...created].reverse());
  const et = (await page('sort_field=event_type&sort_direction=asc')).map((e: any) => e.event_type);
  t.deepEqual(et, [...et].sort());
  t.deepEqual(
    (await page('sort_field=event_type')).map((e: any) => e.event_type),
    [...et].sort().reverse(),
  );
  const st = (await page('sort_field=status&sort_direction=asc')).map((e: any) => e.status);
  t.deepEqual(st, ['failure', 'success', 'success', 'success', 'success', 'success']);
  const all = await get('/v1/admin/audit?sort_field=user_id&sort_direction=asc&limit=100');
  const expected = await stack()
    .db('audit_events')
    .orderBy([
      { column: 'user_id', order: 'asc' },
      { column: 'created_at', order: 'asc' },
      { column: 'id', order: 'asc' },
    ])
    .limit(100)
    .pluck('id');
  t.deepEqual(
    all.body.events.map((e: any) => e.id),
    expected,
  );

  for (const [bad, name] of [
    ['sort_field=ip_address', 'sort_field'],
    ['sort_direction=up', 'sort_direction'],
    ['is_reported=yes', 'is_reported'],
    ['start_date=yesterday', 'start_date'],
    ['end_date=2026-13-45', 'end_date'],
    // Days that do not exist were rolled over by Date.parse (to 2 March).
    ['start_date=2026-02-30', 'start_date'],
    ['end_date=2026-04-31T10:00:00Z', 'end_date'],
    ['source_service=mail', 'source_service'],
    ['user_search=', 'user_search'],
    ['start_date=2026-02-01&end_date=2026-01-01', 'start_date'],
  ]) {
    const r = await get(`/v1/admin/audit?${bad}`);
    t.is(r.status, 400, bad);
    t.true(r.body.message.startsWith(`${name}:`), `${bad}: ${r.body.message}`);
  }
  t.is((await get('/v1/admin/audit', alice.token)).status, 403);
});

test.serial(
  'totals: exact without filters from the row counter; filtered counts capped, then estimated; one statement a page',
  async (t) => {
    const s = stack();
    await seed();
    const carol = await createUser(s.db);
    // One more than the cap, straight in SQL (the counter trigger sees them too).
    await s.db.raw(
      `INSERT INTO audit_events (user_id, event_type, status, source_service, metadata, created_at)
     SELECT ?, 'login', 'success', 'api', '{}', now() - make_interval(secs => g) FROM generate_series(1, 10001) g`,
      [carol.id],
    );
    await s.db.raw('ANALYZE audit_events');
    const statements: string[] = [];
    const listener = (q: { sql: string }) => {
      if (/audit_events/.test(q.sql)) statements.push(q.sql);
    };
    const db = s.api.services.db;
    db.on('query', listener);
    try {
      const [{ n }] = (await s.db('audit_events').count({ n: '*' })) as Array<{ n: number }>;
      statements.length = 0;
      const all = await get('/v1/admin/audit');
      t.is(all.status, 200);
      t.is(all.body.total_count, Number(n));
      t.is(all.headers.get('x-total-count-estimated'), null);
      t.is(statements.length, 1, statements.join('\n'));

      // Identical pages asked for in one turn are built and read once, each caller with the full page.
      statements.length = 0;
      const same = await Promise.all(
        [1, 2, 3].map(() => findAuditPage(db, { user_id: alice.id }, { page: 1, limit: 5 })),
      );
      t.is(statements.length, 1, statements.join('\n'));
      t.is(same[0].events.length, 5);
      t.is(same[2], same[0]);
      const separate = await findAuditPage(db, { user_id: alice.id }, { page: 1, limit: 5 });
      t.is(statements.length, 2, 'the next turn reads again');
      t.deepEqual(
        separate.events.map((e) => e.id),
        same[0].events.map((e) => e.id),
      );

      // Different users' pages asked for in one turn: one statement, each user's own events and total.
      statements.length = 0;
      const perUser = await Promise.all(
        [alice.id, bob.id, alice.id.toUpperCase(), randomUUID()].map((u) =>
          findAuditPage(db, { user_id: u }, { page: 1, limit: 4 }),
        ),
      );
      t.is(statements.length, 1, statements.join('\n'));
      t.deepEqual(
        perUser.map((p) => [p.total, p.events.length, [...new Set(p.events.map((e) => e.user_id))]]),
        [
          [6, 4, [alice.id]],
          [3, 3, [bob.id]],
          [6, 4, [alice.id]],
          [0, 0, []],
        ],
      );
      const times = perUser[0].events.map((e) => new Date(e.created_at).getTime());
      t.deepEqual(
        times,
        [...times].sort((a, b) => b - a),
        'newest first',
      );

      statements.length = 0;
      const few = await get(`/v1/admin/audit?user_id=${alice.id}`);
      t.is(few.body.total_count, 6);
      t.is(statements.length, 1, statements.join('\n'));

      // A user's events alone: the exact total from the user's keyed counter, however many.
      statements.length = 0;
      const many = await get(`/v1/admin/audit?user_id=${carol.id}`);
      t.is(many.status, 200);
      t.is(many.body.total_count, 10_001);
      t.is(many.headers.get('x-total-count-estimated'), null);
      t.is(many.body.events.length, 20);
      t.is(statements.length, 1, statements.join('\n'));
      const mine = await get(`/v1/users/${carol.id}/audit?page=2&limit=7`);
      t.is(mine.body.total_count, 10_001);
      t.is(mine.body.total_pages, Math.ceil(10_001 / 7));

      // With another filter beside the user: counted up to the cap, then the planner's estimate.
      statements.length = 0;
      const filteredMany = await get(`/v1/admin/audit?user_id=${carol.id}&status=success`);
      t.is(filteredMany.status, 200);
      t.true(filteredMany.body.total_count > 10_000);
      t.is(filteredMany.headers.get('x-total-count-estimated'), 'true');
      t.is(filteredMany.body.events.length, 20);
      t.is(statements.length, 2, statements.join('\n'));

      // Past the last page: no rows, the total still given.
      const past = await get(`/v1/admin/audit?user_id=${alice.id}&page=50`);
      t.deepEqual(past.body.events, []);
      t.is(past.body.total_count, 6);
    } finally {
      db.off('query', listener);
      await s.db('audit_events').where('user_id', carol.id).delete();
    }
  },
);
