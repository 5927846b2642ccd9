import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { make, once } from '../helpers/tracking';

// GraphQL's whole-table lists (roles, platforms, the trip category tree, trip templates) are kept per
// table version, and its filtered pages read their totals from the same counters as REST.
const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000' } });
const admin = once(() => createUser(stack().db, { roles: ['role_admin'] }));

const gql = async (query: string) => {
  const r = await stack().request('POST', '/v1/gql', { token: (await admin()).token, body: { query } });
  if (r.status !== 200 || r.body.errors) throw new Error(r.text);
  return r.body.data;
};

/** The statements the api sends while `fn` runs. */
async function statementsOf(fn: () => Promise<unknown>): Promise<string[]> {
  const db = stack().db;
  const seen: string[] = [];
  const listener = (q: { sql: string }) => seen.push(q.sql);
  db.on('query', listener);
  try {
    await fn();
  } finally {
    db.off('query', listener);
  }
  return seen;
}

const LISTS = [
  { query: '{ roles { id name } }', table: 'roles', field: 'roles' },
  { query: '{ platforms { id name } }', table: 'platforms', field: 'platforms' },
  { query: '{ tripCategories { id name } }', table: 'trip_categories', field: 'tripCategories' },
  { query: '{ tripTemplates { id name } }', table: 'trip_templates', field: 'tripTemplates' },
];

test.serial(
  'a whole-table list is read once per table version and sees a write on the very next request',
  async (t) => {
    const s = stack();
    const token = (await admin()).token;
    await make(s, token, '/v1/trip-categories', { name: 'Cat A' });
    await make(s, token, '/v1/trip-templates', { name: 'Tpl A' });
    for (const { query, table, field } of LISTS) {
      const first = await gql(query);
      // A repeat reads the table's version, not its rows.
      const seen = await statementsOf(() => gql(query));
      t.false(
        seen.some((sql) => new RegExp(`from "${table}"`).test(sql)),
        `${field}: ${seen.join(' | ')}`,
      );
      t.true(
        seen.some((sql) => /table_versions/.test(sql)),
        `${field}: the version is read`,
      );
      t.deepEqual(await gql(query), first, field);
    }
    // Writes through the API and straight in SQL (another instance's write) are seen at once.
    const role = await make(s, token, '/v1/roles', { name: 'Counted role' });
    t.true((await gql(LISTS[0].query)).roles.some((r: { id: string }) => r.id === role.id));
    await s.db('platforms').insert({ name: 'SQL platform', slug: 'sqlplat' });
    t.true((await gql(LISTS[1].query)).platforms.some((p: { name: string }) => p.name === 'SQL platform'));
    const child = await make(s, token, '/v1/trip-categories', { name: 'Cat B' });
    t.true((await gql(LISTS[2].query)).tripCategories.some((c: { id: string }) => c.id === child.id));
    await s.db('trip_templates').where('name', 'Tpl A').update({ name: 'Tpl A renamed' });
    t.true((await gql(LISTS[3].query)).tripTemplates.some((c: { name: string }) => c.name === 'Tpl A renamed'));
  },
);

test.serial('filtered pages take their totals from the counters REST uses', async (t) => {
  const s = stack();
  const token = (await admin()).token;
  for (let i = 0; i < 3; i++) await make(s, token, '/v1/trips', { name: `counted ${i}` });
  // REST keeps its answer per trips version (a counter shard is no write to trips): each call asks
  // for another limit, so none is a kept answer.
  let limit = 0;
  const draft = async () => ({
    rest: (await s.request('GET', `/v1/trips?status=draft&limit=${++limit}`, { token })).body.pagination.total,
    gql: (await gql('{ trips(status: "draft", limit: 1) { pagination { total } } }')).trips.pagination.total,
  });
  const users = async () => (await gql('{ users(limit: 1) { pagination { total } } }')).users.pagination.total;
  const { rows } = await s.db.raw(`SELECT count(*)::int AS n FROM trips WHERE status = 'draft'`);
  t.deepEqual(await draft(), { rest: rows[0].n, gql: rows[0].n });
  const live = await users();
  // A planted counter shard is what the totals say: they are read, not counted.
  await s.db('row_counters').insert([
    { counter: 'trips_by_status:draft', shard: 999, n: 100 },
    { counter: 'users_live', shard: 999, n: 100 },
  ]);
  try {
    t.deepEqual(await draft(), { rest: rows[0].n + 100, gql: rows[0].n + 100 });
    t.is(await users(), live + 100);
  } finally {
    await s.db('row_counters').where({ shard: 999 }).delete();
  }
});
