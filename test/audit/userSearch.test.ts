import test from 'ava';
import { AUDIT_COUNT_CAP } from '../../shared/queries/audit';
import { createUser, TestUser } from '../helpers/factories';
import { statementName } from '../../shared/preparedStatements';
import { explainJson, explainPrepared, vacuumSettled } from '../helpers/statements';
import { useStack } from '../helpers/stack';

/**
 * GET /v1/admin/audit?user_search=: the matching users are looked up once, in a statement of their
 * own, and the page filters by their ids as values (so the planner knows how many users and how
 * many events it is reading); a text matching more than USER_SEARCH_MAX_MATCHES usernames or
 * email addresses is searched whole, as a subquery. A stack of its own: the plans depend on the whole table.
 */
const stack = useStack(test);
/** The documented number of matching usernames, and of emails, passed as values (docs/audit.md). */
const USER_SEARCH_MAX_MATCHES = 1000;
let admin: TestUser;
let heavy: TestUser;
let others: TestUser[];

/** Events of the heavy user: well past the count cap, so reading them all shows in the plan. */
const HEAVY_EVENTS = 30_000;

async function seed() {
  const db = stack().db;
  admin = await createUser(db, { roles: ['role_admin'] });
  heavy = await createUser(db, { username: 'heavysearch_one', email: 'someone@heavy.test' });
  others = [
    await createUser(db, { username: 'findme_alpha' }),
    await createUser(db, { username: 'plain_user_b', email: 'b.findme@mail.test' }),
    await createUser(db, { username: 'plain_user_c' }),
  ];
  await db.raw(
    `INSERT INTO audit_events (user_id, event_type, status, source_service, metadata, created_at)
     SELECT ?, 'login', 'success', 'api', '{}', timestamptz '2026-01-01' + make_interval(secs => g) FROM generate_series(1, ?::int) g`,
    [heavy.id, HEAVY_EVENTS],
  );
  // The other users' events, and an external id's (a bot's), interleaved with the heavy user's.
  await db.raw(
    `INSERT INTO audit_events (user_id, event_type, status, source_service, metadata, created_at)
     SELECT (ARRAY[?, ?, ?, 'ext:findme'])[1 + g % 4], 'logout', 'success', 'api', '{}',
            timestamptz '2026-01-01' + make_interval(secs => g * 7 + 0.5)
     FROM generate_series(1, 4000) g`,
    others.map((u) => u.id),
  );
  // Everyone else: 20,000 events of 5,000 users, so that a user is, to the planner, a few events
  // among many users (as in production), and the heavy user the exception its statistics show.
  await db.raw(
    `INSERT INTO audit_events (user_id, event_type, status, source_service, metadata, created_at)
     SELECT 'bg:' || (g % 5000), 'login', 'success', 'api', '{}', timestamptz '2026-01-01' + make_interval(secs => g * 1.5 + 0.25)
     FROM generate_series(1, 20000) g`,
  );
  await vacuumSettled(db, 'audit_events');
}

const get = (path: string) => stack().request('GET', path, { token: admin.token });

/** The statements the api sends while `fn` runs. */
async function statementsDuring(fn: () => Promise<unknown>) {
  const db = stack().api.services.db;
  const seen: Array<{ sql: string; bindings: unknown[] }> = [];
  const listener = (q: { sql: string; bindings: unknown[] }) => seen.push({ sql: q.sql, bindings: q.bindings });
  db.on('query', listener);
  try {
    await fn();
  } finally {
    db.off('query', listener);
  }
  return seen;
}

test.serial('the users are looked up once; the page reads them as values, not a subquery', async (t) => {
  await seed();
  let r: Awaited<ReturnType<typeof get>> | undefined;
  const seen = await statementsDuring(async () => {
    r = await get('/v1/admin/audit?user_search=findme&limit=50');
  });
  t.is(r!.status, 200, r!.text);
  // (The session's own reads of users are not the search's.)
  const lookups = seen.filter((s) => /lower\((username|email)\)/.test(s.sql));
  t.is(lookups.length, 1, lookups.map((s) => s.sql).join('\n'));
  const pages = seen.filter((s) => /from "audit_events"/.test(s.sql));
  t.is(pages.length, 1);
  t.notRegex(pages[0]!.sql, /\b(users|platform_accounts)\b/, 'the page statement looks no user up');

  // The same events and total as SQL: findme_alpha by username, plain_user_b by email, and
  // ext:findme is not the text (an id matches exactly), so not among them.
  const expected = await stack()
    .db('audit_events')
    .whereIn('user_id', [others[0]!.id, others[1]!.id])
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .pluck('id');
  t.is(r!.body.total_count, expected.length);
  t.deepEqual(
    r!.body.events.map((e: { id: string }) => e.id),
    expected.slice(0, 50),
  );
  // A text that is an id with events matches it exactly.
  const ext = await get('/v1/admin/audit?user_search=ext:findme&limit=5');
  t.is(ext.body.total_count, 1000);
  t.deepEqual([...new Set(ext.body.events.map((e: { user_id: string }) => e.user_id))], ['ext:findme']);
});

test.serial('one user with many events: the page reads its rows off the user index, not all of them', async (t) => {
  let r: Awaited<ReturnType<typeof get>> | undefined;
  const seen = await statementsDuring(async () => {
    r = await get('/v1/admin/audit?user_search=heavysearch&limit=100');
  });
  t.is(r!.status, 200, r!.text);
  t.is(r!.body.events.length, 100);
  t.true(r!.body.events.every((e: { user_id: string }) => e.user_id === heavy.id));
  const page = seen.find((s) => /from "audit_events".*order by/is.test(s.sql));
  t.truthy(page);
  const plan = await explainJson(stack().db, page!, { analyze: true });
  // The capped count reads at most AUDIT_COUNT_CAP + 1 index entries; the page itself, 101 rows.
  // With the users as a subquery the plan read all 30,000 of the user's events and sorted them.
  const read = [...plan.matchAll(/"Actual Rows":(\d+)/g)].map((m) => Number(m[1]));
  t.true(Math.max(...read) <= AUDIT_COUNT_CAP + 1, `rows read: ${read.join(', ')}`);
  t.notRegex(plan, /"Node Type":"Sort"/, 'the page comes off an index in order, unsorted');
  // The estimate (past the cap) is the planner's for this user, not a floor from a guess.
  t.is(r!.headers.get('x-total-count-estimated'), 'true');
  t.true(r!.body.total_count > HEAVY_EVENTS / 2, String(r!.body.total_count));
});

test.serial('a filter value no event has is planned for itself, not with the plan of a common one', async (t) => {
  // A common type first, more than the five runs after which PostgreSQL reuses a generic plan for
  // a named statement (new limits: the response cache would answer a repeated URL itself).
  for (let i = 0; i < 7; i++) {
    const common = await get(`/v1/users/${heavy.id}/audit?event_type=login&limit=${10 + i}`);
    t.is(common.status, 200, common.text);
  }
  let r: Awaited<ReturnType<typeof get>> | undefined;
  const seen = await statementsDuring(async () => {
    r = await get(`/v1/users/${heavy.id}/audit?event_type=2fa_enabled&limit=20`);
  });
  t.is(r!.status, 200, r!.text);
  t.is(r!.body.total_count, 0);
  const page = seen.find((s) => /from "audit_events".*order by/is.test(s.sql));
  t.truthy(page);
  // Sent unnamed, so planned for its values each time (shared/preparedStatements.ts).
  t.is(statementName(page!.sql), undefined, page!.sql);
  // What that avoids: the generic plan reads the user's events through the user index and filters
  // them all out; planned for the value, the type index finds none.
  // Rows each scan of audit_events looked at: those it returned and those its filter removed.
  const read = async (mode: 'generic' | 'custom') => {
    type Node = Record<string, unknown> & { Plans?: Node[] };
    const walk = (n: Node): Node[] => [n, ...(n.Plans ?? []).flatMap(walk)];
    const plan = JSON.parse(await explainPrepared(stack().db, page!, mode)) as Array<{ Plan: Node }>;
    return walk(plan[0]!.Plan)
      .filter((n) => n['Relation Name'] === 'audit_events')
      .reduce(
        (sum, n) =>
          sum + (Number(n['Actual Rows']) + Number(n['Rows Removed by Filter'] ?? 0)) * Number(n['Actual Loops']),
        0,
      );
  };
  const custom = await read('custom');
  const generic = await read('generic');
  t.is(custom, 0);
  t.true(generic >= HEAVY_EVENTS, `the generic plan read ${generic} rows`);
});

test.serial('a text matching more usernames or emails than the cap is searched whole, as a subquery', async (t) => {
  const db = stack().db;
  const expected = async (like: string) =>
    (
      await db.raw(
        `SELECT count(*)::int AS n FROM audit_events WHERE user_id IN
           (SELECT id::text FROM users WHERE lower(username) LIKE ? UNION
            SELECT user_id::text FROM platform_accounts WHERE lower(email) LIKE ?)`,
        [like, like],
      )
    ).rows[0].n as number;
  await db.raw(`INSERT INTO users (username) SELECT 'crowdcap_' || g FROM generate_series(1, ?::int) g`, [
    USER_SEARCH_MAX_MATCHES + 1,
  ]);
  // One event for each of them: all must be found, none left out by a cap.
  await db.raw(
    `INSERT INTO audit_events (user_id, event_type, status, source_service)
     SELECT id::text, 'login_success', 'success', 'api' FROM users WHERE username LIKE 'crowdcap\\_%'`,
  );
  const over = await get('/v1/admin/audit?user_search=crowdcap_&limit=100');
  t.is(over.status, 200, over.text);
  t.is(over.body.total_count, await expected('%crowdcap\\_%'));
  t.is(over.body.total_count, USER_SEARCH_MAX_MATCHES + 1);
  // The same through emails.
  const emails = await db.raw(
    `INSERT INTO platform_accounts (user_id, platform_id, platform_user_id, email, is_oauth)
     SELECT u.id, (SELECT id FROM platforms WHERE slug = 'email'), 'mailcap' || u.username, 'x.' || u.username || '@mailcap.test', false
     FROM users u WHERE u.username LIKE 'crowdcap\\_%'`,
  );
  t.true(emails.rowCount > USER_SEARCH_MAX_MATCHES);
  const byEmail = await get('/v1/admin/audit?user_search=mailcap.test');
  t.is(byEmail.status, 200, byEmail.text);
  t.is(byEmail.body.total_count, USER_SEARCH_MAX_MATCHES + 1);
});
