import test from 'ava';
import { AUDIT_COUNT_CAP } from '../../shared/queries/audit';
import { createUser, TestUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

/**
 * GET /v1/admin/audit with a filter matching more than AUDIT_COUNT_CAP events, whose total is the
 * planner's estimate: the estimate may be below or above the real count, yet following `next`
 * reaches every event and stops at the last page, whose total is exact. A stack of its own: the
 * planner's statistics are made stale on purpose, and no other test may write events meanwhile.
 */
const stack = useStack(test);
let admin: TestUser;

/** Real counts after seeding. */
const FAILURES = 12_000;
const SUCCESSES = 15_000;

/**
 * Statistics taken when failures were 1 in 11 events and successes 10 in 11; then 10,000 failures
 * are added and 5,000 successes deleted without a new ANALYZE (autovacuum off for the table), so
 * the planner estimates far fewer failures than there are (about 3,000: the total shown is the
 * floor, 10,001) and far more successes (about 29,000).
 */
async function seed() {
  const db = stack().db;
  admin = await createUser(db, { roles: ['role_admin'] });
  await db.raw('ALTER TABLE audit_events SET (autovacuum_enabled = false)');
  const insert = (status: string, from: number, to: number) =>
    db.raw(
      `INSERT INTO audit_events (user_id, event_type, status, source_service, metadata, created_at)
       SELECT 'estimated-' || (g % 13), 'login', ?, 'api', '{}', timestamptz '2026-01-01' + make_interval(secs => g)
       FROM generate_series(?::int, ?::int) g`,
      [status, from, to],
    );
  await insert('failure', 1, 2000);
  await insert('success', 100_001, 120_000);
  await db.raw('ANALYZE audit_events');
  await insert('failure', 2001, 12_000);
  await db.raw(
    `DELETE FROM audit_events WHERE status = 'success' AND created_at < timestamptz '2026-01-01' + interval '105001 seconds'`,
  );
}

const get = (path: string) => stack().request('GET', path, { token: admin.token });
type Page = {
  status: number;
  text: string;
  headers: Headers;
  body: {
    events: Array<{ id: string }>;
    total_count: number;
    total_pages: number;
    page: number;
    _links: { next?: string; last: string; prev?: string };
  };
};

/** The ids of events with `status`, in the list's default order, from SQL. */
async function expectedIds(status: string): Promise<string[]> {
  return stack()
    .db('audit_events')
    .where('status', status)
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .pluck('id');
}

test.serial(
  'an estimate below the real count: following next reaches every event, the last total is exact',
  async (t) => {
    await seed();
    const expected = await expectedIds('failure');
    t.is(expected.length, FAILURES);

    const first = (await get('/v1/admin/audit?status=failure&limit=100')) as Page;
    t.is(first.status, 200, first.text);
    // The case under test: the first page's total is an estimate, below the real count.
    t.is(first.headers.get('x-total-count-estimated'), 'true');
    t.true(first.body.total_count > AUDIT_COUNT_CAP, String(first.body.total_count));
    t.true(first.body.total_count < FAILURES, `estimate ${first.body.total_count} is below ${FAILURES}`);

    const seen: string[] = [];
    let page: Page = first;
    for (let n = 1; ; n++) {
      t.is(page.status, 200, page.text);
      t.is(page.body.page, n);
      seen.push(...page.body.events.map((e) => e.id));
      // A page with rows never says it lies past the last page.
      t.true(page.body.total_pages >= n, `page ${n}: total_pages ${page.body.total_pages}`);
      if (!page.body._links.next) break;
      if (n > 200) return t.fail('next links never ended');
      page = (await get(page.body._links.next)) as Page;
    }
    t.is(seen.length, expected.length, 'following next reads every event');
    if (seen.length === expected.length) t.deepEqual(seen, expected, 'once each, in order');
    // The last page knows where the events end: the total is exact there, and not flagged.
    t.is(page.body.page, FAILURES / 100);
    t.is(page.body.total_count, FAILURES);
    t.is(page.body.total_pages, FAILURES / 100);
    t.regex(page.body._links.last, new RegExp(`page=${FAILURES / 100}\\b`));
    t.is(page.headers.get('x-total-count-estimated'), null);

    // A short last page (limit 70: 171 full pages and 30 events) is exact too.
    const short = (await get(`/v1/admin/audit?status=failure&limit=70&page=${Math.ceil(FAILURES / 70)}`)) as Page;
    t.is(short.body.events.length, FAILURES % 70);
    t.is(short.body.total_count, FAILURES);
    t.is(short.body._links.next, undefined);
    t.is(short.headers.get('x-total-count-estimated'), null);
    // The page before it has a next link, and a total past its own rows.
    const before = (await get(`/v1/admin/audit?status=failure&limit=70&page=${Math.ceil(FAILURES / 70) - 1}`)) as Page;
    t.truthy(before.body._links.next);
    t.true(before.body.total_pages > before.body.page);

    // Past the end: no rows, no next, a total no larger than the offset.
    const past = (await get('/v1/admin/audit?status=failure&limit=100&page=200')) as Page;
    t.deepEqual(past.body.events, []);
    t.is(past.body._links.next, undefined);
    t.true(
      past.body.total_count > AUDIT_COUNT_CAP && past.body.total_count <= 199 * 100,
      String(past.body.total_count),
    );
  },
);

test.serial('an estimate above the real count: the last page has no next link and an exact total', async (t) => {
  const expected = await expectedIds('success');
  t.is(expected.length, SUCCESSES);
  const first = (await get('/v1/admin/audit?status=success&limit=100')) as Page;
  t.is(first.status, 200, first.text);
  // The case under test: the first page's total is an estimate, above the real count.
  t.is(first.headers.get('x-total-count-estimated'), 'true');
  t.true(first.body.total_count > SUCCESSES, `estimate ${first.body.total_count} is above ${SUCCESSES}`);
  t.truthy(first.body._links.next);

  const lastPage = SUCCESSES / 100;
  const last = (await get(`/v1/admin/audit?status=success&limit=100&page=${lastPage}`)) as Page;
  t.deepEqual(
    last.body.events.map((e) => e.id),
    expected.slice(-100),
  );
  t.is(last.body._links.next, undefined, 'no next link to an empty page');
  t.is(last.body.total_count, SUCCESSES);
  t.is(last.body.total_pages, lastPage);
  t.is(last.headers.get('x-total-count-estimated'), null);
  // The page before the last still links to it.
  const before = (await get(`/v1/admin/audit?status=success&limit=100&page=${lastPage - 1}`)) as Page;
  t.regex(before.body._links.next ?? '', new RegExp(`page=${lastPage}\\b`));
});
