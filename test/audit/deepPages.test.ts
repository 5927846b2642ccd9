import test from 'ava';
import { createUser, TestUser } from '../helpers/factories';
import { statementName } from '../../shared/preparedStatements';
import { explainJson, heapRowsRead, vacuumSettled } from '../helpers/statements';
import { useStack } from '../helpers/stack';

/**
 * GET /v1/admin/audit at depth: unfiltered pages past the middle are read from the end (the same
 * events as reading through OFFSET), and a user_search reads the events by the user_id index. A
 * stack of its own: the pages compare the whole table, which no other test may write meanwhile.
 */
const stack = useStack(test);
let admin: TestUser;

/** Run by the first test (useStack's own hook starts the stack before any test, after hooks of this file). */
async function seed() {
  const db = stack().db;
  admin = await createUser(db, { roles: ['role_admin'] });
  // 3,000 events a second apart, with ties on created_at every tenth (the id breaks them).
  await db.raw(
    `INSERT INTO audit_events (user_id, event_type, resource_type, created_at)
     SELECT 'deep-' || (g % 7), CASE WHEN g % 3 = 0 THEN 'login' ELSE 'user_updated' END, 'user',
            timestamptz '2026-01-01' + ((g / 10) * 10 || ' seconds')::interval
     FROM generate_series(1, 3000) g`,
  );
  // System events without a user among them (a NULL in the user_id sort).
  await db.raw(
    `INSERT INTO audit_events (user_id, event_type, resource_type, created_at)
     SELECT NULL, 'login', 'user', timestamptz '2026-01-01' + ((g * 50) || ' seconds')::interval
     FROM generate_series(1, 60) g`,
  );
}

const get = (path: string) => stack().request('GET', path, { token: admin.token });
const ids = (r: { body: { events: Array<{ id: string }> } }) => r.body.events.map((e) => e.id);

test.serial('unfiltered deep pages, either direction, are the pages OFFSET reads', async (t) => {
  await seed();
  const db = stack().db;
  const before = (await db('audit_events').count({ n: '*' }))[0].n;
  const first = await get('/v1/admin/audit?limit=50');
  const total = first.body.total_count as number;
  t.true(total >= 3000);
  const last = Math.ceil(total / 50);
  for (const dir of ['desc', 'asc'])
    for (const page of [25, 40, last - 1, last, last + 1]) {
      const q = `limit=50&page=${page}&sort_direction=${dir}`;
      const fromEnd = await get(`/v1/admin/audit?${q}`);
      // A filter every event passes takes the OFFSET path.
      const viaOffset = await get(`/v1/admin/audit?${q}&start_date=2000-01-01T00:00:00Z`);
      t.is(fromEnd.status, 200, fromEnd.text);
      t.deepEqual(ids(fromEnd), ids(viaOffset), `${dir} page ${page}`);
      t.is(fromEnd.body.total_count, total);
      if (page <= last) t.is(fromEnd.body.events.length, page < last ? 50 : total - (last - 1) * 50);
    }
  // Every sort (user_id has NULLs), either direction, at depth: the pages OFFSET reads.
  for (const field of ['user_id', 'status', 'event_type'])
    for (const dir of ['desc', 'asc'])
      for (const page of [25, 40, last - 1]) {
        const q = `limit=50&page=${page}&sort_field=${field}&sort_direction=${dir}`;
        const deep = await get(`/v1/admin/audit?${q}`);
        const viaOffset = await get(`/v1/admin/audit?${q}&start_date=2000-01-01T00:00:00Z`);
        t.is(deep.status, 200, deep.text);
        t.deepEqual(ids(deep), ids(viaOffset), `${field} ${dir} page ${page}`);
      }
  // The last page walks no more than its rows from the end, not the 3,000 before it.
  const seen: Array<{ sql: string; bindings: unknown[] }> = [];
  const listener = (q: { sql: string; bindings: unknown[] }) => {
    if (/from "audit_events".*order by/is.test(q.sql)) seen.push(q);
  };
  db.on('query', listener);
  try {
    t.is((await get(`/v1/admin/audit?limit=50&page=${last}`)).status, 200);
  } finally {
    db.off('query', listener);
  }
  t.is(seen.length, 1);
  // Scans off: on 3,000 rows the planner may prefer reading them all and sorting.
  const explained = await explainJson(db, seen[0], {
    analyze: true,
    settings: ['SET enable_seqscan = off', 'SET enable_bitmapscan = off'],
  });
  const walked = [...explained.matchAll(/"Actual Rows":(\d+)/g)].map((m) => Number(m[1]));
  t.true(Math.max(...walked) <= 100, `rows walked: ${walked.join(', ')}`);
  // Reads wrote nothing: the comparison above held the table still.
  t.is((await db('audit_events').count({ n: '*' }))[0].n, before);

  // A page before the middle (offset 1,200) is a deferred join: its ids off the index alone, then
  // its 50 rows by key, not the 1,250 rows OFFSET fetched; sent unnamed, planned for its offset.
  await vacuumSettled(db, 'audit_events');
  const middle: Array<{ sql: string; bindings: unknown[] }> = [];
  const onMiddle = (q: { sql: string; bindings: unknown[] }) => {
    if (/from "audit_events"|from \(select "id" from "audit_events"/is.test(q.sql)) middle.push(q);
  };
  db.on('query', onMiddle);
  try {
    t.is((await get('/v1/admin/audit?limit=50&page=25')).status, 200);
  } finally {
    db.off('query', onMiddle);
  }
  t.is(middle.length, 1, middle.map((q) => q.sql).join('\n'));
  t.is(statementName(middle[0]!.sql), undefined);
  const heapRows = heapRowsRead(
    await explainJson(db, middle[0]!, {
      analyze: true,
      settings: ['SET enable_seqscan = off', 'SET enable_bitmapscan = off'],
    }),
    'audit_events',
  );
  t.true(heapRows <= 50, `rows read from the table: ${heapRows}`);
});

test.serial('a user_search reads the events by the user index, not by a filter over all of them', async (t) => {
  const db = stack().db;
  const seen: Array<{ sql: string; bindings: unknown[] }> = [];
  const listener = (q: { sql: string; bindings: unknown[] }) => {
    if (/from "audit_events"/.test(q.sql)) seen.push(q);
  };
  db.on('query', listener);
  let r;
  try {
    r = await get('/v1/admin/audit?user_search=deep-3&limit=5');
  } finally {
    db.off('query', listener);
  }
  t.is(r.status, 200, r.text);
  t.is(r.body.total_count, 429); // g = 3, 10, …, 2999
  t.is(seen.length, 1);
  // The user's events are found by an index condition on user_id. `user_id = ? OR user_id IN
  // (subquery)` filtered every entry of an index instead (a hashed subplan per row).
  const plan = await explainJson(db, seen[0], { settings: ['SET enable_seqscan = off'] });
  t.regex(plan, /"Index Cond":"\(\(user_id\)::text = /);
  t.notRegex(plan, /hashed SubPlan/);
});
