import test from 'ava';
import type { Knex } from 'knex';
import { createUser, insertTrackPoints } from '../helpers/factories';
import { HttpResult, useStack } from '../helpers/stack';
import { fewestStatements } from '../helpers/statements';
import { once } from '../helpers/tracking';

const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000' } });
const admin = once(() => createUser(stack().db, { roles: ['role_admin'] }));

/** `n` trips (newest last), each with `points` GPS points one minute apart. */
async function seedTrips(db: Knex, n: number, points: number, tag: string): Promise<string[]> {
  const trips: Array<{ id: string }> = await db('trips')
    .insert(Array.from({ length: n }, (_, i) => ({ name: `${tag} ${i}`, tags: [tag] })))
    .returning('id');
  for (const trip of trips) await insertTrackPoints(db, points, { device_id: `dev-${tag}`, trip_id: trip.id });
  return trips.map((t) => t.id);
}

const LIST = `query($limit: Int!, $first: Int!) {
  trips(limit: $limit) {
    pagination { total }
    data { id name history { newStatus } gpsPoints(first: $first) { nodes { id latitude } pageInfo { hasNextPage endCursor } } }
  }
}`;

/** The api process's own background work (the side-effect outbox relay polls), not the request's. */
const background = (sql: string) => /\bside_effect_outbox\b/.test(sql);

/**
 * Runs the query and counts the SQL statements the api sent while answering it (the fewest of three
 * runs with the credential cached: test/helpers/statements.ts).
 */
async function countStatements(token: string, variables: Record<string, unknown>) {
  const s = stack();
  const sql: string[] = [];
  let r!: HttpResult;
  const statements = await fewestStatements(
    s,
    async () => (r = await s.request('POST', '/v1/gql', { token, body: { query: LIST, variables } })),
    { counted: (q) => !background(q), sql },
  );
  return { r, statements, sql: sql.map((q) => q.slice(0, 80)) };
}

test.serial('a list of trips with their points and history costs a constant number of SQL statements', async (t) => {
  const s = stack();
  const { token } = await admin();
  await seedTrips(s.db, 100, 5, 'n1');
  await countStatements(token, { limit: 1, first: 1 }); // warm the credential cache

  const one = await countStatements(token, { limit: 1, first: 3 });
  const hundred = await countStatements(token, { limit: 100, first: 3 });
  t.is(hundred.r.status, 200, hundred.r.text);
  t.is(hundred.r.body.errors, undefined, hundred.r.text);
  const trips = hundred.r.body.data.trips.data;
  t.is(trips.length, 100);
  for (const trip of trips) {
    t.is(trip.gpsPoints.nodes.length, 3);
    t.true(trip.gpsPoints.pageInfo.hasNextPage);
  }
  // The page of trips with its total, one statement for every trip's points, one for every trip's history.
  t.is(hundred.statements, one.statements, `1 trip: ${one.sql.join(' | ')}, 100 trips: ${hundred.sql.join(' | ')}`);
  t.is(hundred.statements, 3, hundred.sql.join(' | '));
});

test.serial('gpsPoints pages through a trip in track order with first/after', async (t) => {
  const s = stack();
  const { token } = await admin();
  const [tripId] = await seedTrips(s.db, 1, 5, 'pages');
  const Q = `query($id: String!, $after: String) { trip(id: $id) { gpsPoints(first: 2, after: $after) {
    nodes { id latitude timestamp speedKmh } pageInfo { hasNextPage endCursor } } } }`;
  const seen: number[] = [];
  let after: string | null = null;
  for (let page = 0; page < 3; page++) {
    const r: { body: any } = await s.request('POST', '/v1/gql', {
      token,
      body: { query: Q, variables: { id: tripId, after } },
    });
    const conn: any = r.body.data.trip.gpsPoints;
    seen.push(...conn.nodes.map((n: { latitude: number }) => Math.round((n.latitude - 52) * 1000)));
    t.is(conn.pageInfo.hasNextPage, page < 2);
    after = conn.pageInfo.endCursor;
  }
  t.deepEqual(seen, [0, 1, 2, 3, 4]);
  const bad = await s.request('POST', '/v1/gql', { token, body: { query: Q, variables: { id: tripId, after: 'x' } } });
  t.is(bad.body.errors[0].extensions.code, 'BAD_USER_INPUT');
});

test('a query deeper than the limit is refused with a GraphQL error, before running', async (t) => {
  const s = stack();
  const { token } = await admin();
  let deep = '{ id }';
  for (let i = 0; i < 12; i++) deep = `{ id children ${deep} }`;
  const r = await s.request('POST', '/v1/gql', {
    token,
    headers: { accept: 'application/graphql-response+json' },
    body: { query: `{ tripCategories ${deep} }` },
  });
  t.is(r.status, 400, r.text);
  t.is(r.body.data, undefined);
  t.is(r.body.errors[0].extensions.code, 'QUERY_TOO_DEEP');
  t.is(r.body.errors[0].extensions.status, 400);
  t.regex(r.body.errors[0].message, /^the operation exceeds maximum operation depth of 10/);
  // Plain application/json clients get 200 with the same error (GraphQL over HTTP).
  const plain = await s.request('POST', '/v1/gql', { token, body: { query: `{ tripCategories ${deep} }` } });
  t.is(plain.status, 200);
  t.is(plain.body.errors[0].extensions.code, 'QUERY_TOO_DEEP');
});

test('documents over the size limits are refused before validation, quickly, whoever sends them', async (t) => {
  const s = stack();
  const ask = (body: unknown) =>
    s.request('POST', '/v1/gql', { body, headers: { accept: 'application/graphql-response+json' } });
  // Each fragment spreads the one before twice: 2^23 fields once expanded, from 900 bytes. The depth and
  // cost rules expanded it anew at every spread: 11 s of the event loop at 23 levels, minutes at 200.
  for (const levels of [23, 200]) {
    let fragments = 'fragment G0 on Query { __typename }\n';
    for (let i = 1; i < levels; i++) fragments += `fragment G${i} on Query { ...G${i - 1} ...G${i - 1} }\n`;
    const started = Date.now();
    const r = await ask({ query: `{ ...G${levels - 1} }\n${fragments}` });
    t.true(Date.now() - started < 1000, `${levels} levels took ${Date.now() - started} ms`);
    t.is(r.status, 400, r.text);
    t.is(r.body.errors[0].extensions.code, 'QUERY_TOO_LARGE');
    t.regex(r.body.errors[0].message, /^query: selects more than 2000 fields with its fragments expanded/);
  }
  const refusals: Array<[string, unknown, RegExp]> = [
    // Repeated directives made validation quadratic.
    ['directives', { query: `{ platforms ${'@include(if: true) '.repeat(800)}{ slug } }` }, /more than 100 directives/],
    // A flat text of 2.2 MB overflowed the stack (a text/plain 500).
    ['length', { query: `{ ${'__typename '.repeat(200_000)}}` }, /longer than 16384 characters/],
    // Thousands of levels overflowed the parser's recursion.
    [
      'nesting',
      { query: `{ tripCategories ${'{ children '.repeat(1000)}{ id }${' }'.repeat(1000)} }` },
      /nested deeper than 64 levels/,
    ],
    [
      'nesting',
      { query: `{ tripCategories ${'{ children '.repeat(70)}{ id }${' }'.repeat(70)} }` },
      /nested deeper than 64 levels/,
    ],
  ];
  for (const [what, body, message] of refusals) {
    const r = await ask(body);
    t.is(r.status, 400, `${what}: ${r.text.slice(0, 200)}`);
    t.is(r.body.errors[0].extensions.code, 'QUERY_TOO_LARGE', what);
    t.is(r.body.errors[0].extensions.status, 400, what);
    t.regex(r.body.errors[0].message, message, what);
  }
  // Braces in strings and comments are text, not nesting.
  const text = await ask({ query: `# {{{{ ${'['.repeat(100)}\n{ platforms { slug } }`, operationName: null });
  t.is(text.status, 200, text.text);
  t.true(text.body.data.platforms.length > 0);
  // Variables nested past the body limit are a 400 naming them, in GraphQL's format (a 500 before).
  const deepVariables = `{"query":"{ platforms { slug } }","variables":{"a":${'['.repeat(10_000)}${']'.repeat(10_000)}}}`;
  const v = await s.request('POST', '/v1/gql', { rawBody: deepVariables });
  t.is(v.status, 400, v.text);
  t.regex(v.body.errors[0].message, /^variables\.a\.0\.0: nested deeper than 64 levels/);
  t.is(v.body.errors[0].extensions.code, 'BAD_USER_INPUT');
  // The same over GET (query parameters): the rule does not depend on the method.
  const nested = `{"a":${'['.repeat(100)}${']'.repeat(100)}}`;
  const g = await s.request(
    'GET',
    `/v1/gql?query=${encodeURIComponent('{ platforms { slug } }')}&variables=${encodeURIComponent(nested)}`,
  );
  t.is(g.status, 400, g.text);
  t.regex(g.body.errors[0].message, /^variables\.a\.0\.0: nested deeper than 64 levels/);
  t.is(g.body.errors[0].extensions.code, 'BAD_USER_INPUT');
});

test('invalid documents are refused by validation, at once, before any limit rule walks them', async (t) => {
  const s = stack();
  const ask = (query: string) =>
    s.request('POST', '/v1/gql', { body: { query }, headers: { accept: 'application/graphql-response+json' } });
  // A fragment spreading itself under aliased list fields: the depth rule followed the cycle at every
  // alias (4 aliases: 108 s of the event loop, anonymous, from 140 bytes).
  const aliases = (n: number) => Array.from({ length: n }, (_, i) => `a${i}: children { ...F }`).join(' ');
  const cases: Array<[string, RegExp]> = [
    [`query { tripCategories { ...F } } fragment F on TripCategory { ${aliases(4)} }`, /within itself/],
    [`query { tripCategories { ...F } } fragment F on TripCategory { ${aliases(12)} }`, /within itself/],
    // These answered 500: the limit rules crashed on them.
    ['subscription { __typename }', /the schema has no subscription operations/],
    ['query { ...F }', /Unknown fragment "F"/],
    ['query { ...F ...F } fragment F on Query { ...F }', /within itself/],
    [
      'query($s: Boolean) { platforms @skip(if: $s) { id } }',
      /Variable "\$s" of type "Boolean" used in position expecting type "Boolean!"/,
    ],
    ['query { platforms @skip(if: $u) { id } }', /Variable "\$u" is not defined/],
  ];
  for (const [query, message] of cases) {
    const started = Date.now();
    const r = await ask(query);
    t.true(Date.now() - started < 2000, `${query}: ${Date.now() - started} ms`);
    t.is(r.status, 400, `${query}: ${r.text.slice(0, 300)}`);
    // A variable used wrongly is the caller's input (named in the message); the rest is validation.
    t.is(r.body.errors[0].extensions.code, /\$/.test(query) ? 'BAD_USER_INPUT' : 'GRAPHQL_VALIDATION_FAILED', query);
    t.is(r.body.errors[0].extensions.status, 400, query);
    t.regex(r.body.errors.map((e: { message: string }) => e.message).join(' | '), message, query);
  }
  // The server answered everything else meanwhile, and still does.
  t.is((await s.request('GET', '/v1/health')).status, 200);
});

// Serial: the cost test below counts the statements sent while it runs, and this one creates a user.
test.serial('a mutation operation runs at most 5 root fields, aliases and fragments included', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_user'] });
  const ask = (query: string) =>
    s.request('POST', '/v1/gql', {
      token: user.token,
      body: { query },
      headers: { accept: 'application/graphql-response+json' },
    });
  const tickets = (n: number) => Array.from({ length: n }, (_, i) => `t${i}: mintWsTicket { ticket }`).join(' ');
  const five = await ask(`mutation { ${tickets(5)} }`);
  t.is(five.status, 200, five.text);
  t.is(Object.keys(five.body.data).length, 5);
  for (const query of [
    `mutation { ${tickets(6)} }`,
    `mutation { ${tickets(3)} ...M } fragment M on Mutation { ${tickets(3).replace(/t(\d)/g, 'u$1')} }`,
    `mutation { ${tickets(3)} ... on Mutation { ${tickets(3).replace(/t(\d)/g, 'v$1')} } }`,
  ]) {
    const r = await ask(query);
    t.is(r.status, 400, r.text);
    t.is(r.body.data, undefined, 'nothing ran');
    t.is(r.body.errors[0].extensions.code, 'QUERY_TOO_COMPLEX');
    t.is(r.body.errors[0].extensions.maximumMutations, 5);
    t.regex(r.body.errors[0].message, /at most 5 root fields; this one runs 6/);
  }
  // Queries are not mutations: many aliased reads stay within the cost rule alone.
  const reads = await ask(`{ ${Array.from({ length: 20 }, (_, i) => `p${i}: platforms { slug }`).join(' ')} }`);
  t.is(reads.status, 200, reads.text);
});

// Serial: it counts every statement sent on the shared pool, and the concurrent tests below read
// table versions (cached whole-table lists) on it.
test.serial('an expensive query is refused by its cost, with a GraphQL error', async (t) => {
  const s = stack();
  const { token } = await admin();
  const statements: string[] = [];
  await s.request('POST', '/v1/gql', { token, body: { query: '{ me { userId } }' } }); // warm the credential cache
  let r!: HttpResult;
  await fewestStatements(
    s,
    async () =>
      (r = await s.request('POST', '/v1/gql', {
        token,
        body: {
          query: '{ trips(limit: 100) { data { id gpsPoints(first: 1000) { nodes { id latitude longitude } } } } }',
        },
      })),
    { counted: (q) => !background(q), sql: statements },
  );
  t.is(r.status, 200, r.text);
  t.is(r.body.data, undefined);
  t.is(r.body.errors[0].extensions.code, 'QUERY_TOO_COMPLEX');
  t.true(r.body.errors[0].extensions.cost > r.body.errors[0].extensions.maximumCost);
  t.deepEqual(statements, [], 'nothing ran');
  // Aliases multiply work too: they are priced the same way.
  const aliases = Array.from({ length: 80 }, (_, i) => `a${i}: trips(limit: 100) { data { id name status } }`).join(
    ' ',
  );
  const many = await s.request('POST', '/v1/gql', { token, body: { query: `{ ${aliases} }` } });
  t.is(many.body.errors[0].extensions.code, 'QUERY_TOO_COMPLEX');
});

// Serial: the cost test below counts the statements sent while it runs, and these pages run.
test.serial('a page past the first also costs the rows it skips: aliased deep pages are refused', async (t) => {
  const s = stack();
  const { token } = await admin();
  const ask = (query: string) => s.request('POST', '/v1/gql', { token, body: { query } });
  const pages = (n: number, page: (i: number) => number) =>
    `{ ${Array.from({ length: n }, (_, i) => `a${i}: devices(page: ${page(i)}, limit: 100) { data { id } }`).join(' ')} }`;

  // 20 first pages of 100 devices: 201 each.
  const first = await ask(pages(20, () => 1));
  t.is(first.status, 200, first.text);
  t.is(first.body.errors, undefined, first.text);
  // The same 20 pages, 48,000 to 50,000 rows in: each also costs its skipped rows (docs/graphql.md).
  const deep = await ask(pages(20, (i) => 480 + i));
  t.is(deep.status, 200, deep.text);
  t.is(deep.body.data, undefined);
  t.is(deep.body.errors[0].extensions.code, 'QUERY_TOO_COMPLEX', deep.text);
  t.regex(deep.body.errors[0].message, /^query cost \d+ exceeds the maximum of 20000$/);
  const skipped = Array.from({ length: 20 }, (_, i) => (479 + i) * 10).reduce((a, b) => a + b, 0);
  t.is(deep.body.errors[0].extensions.cost, 20 * 201 + skipped);
  // As documented: devices(page: 500, limit: 100) { data { id } } costs 5,191; three fit, four do not.
  t.is((await ask(pages(3, () => 500))).body.errors, undefined);
  const four = await ask(pages(4, () => 500));
  t.deepEqual(
    [four.body.errors?.[0].extensions.code, four.body.errors?.[0].extensions.cost],
    ['QUERY_TOO_COMPLEX', 4 * 5191],
  );
  // One page at any depth is answered, as REST answers it (the skip cost of a field is capped).
  const deepest = await ask('{ devices(page: 1000000, limit: 100) { data { id } pagination { page } } }');
  t.is(deepest.body.errors, undefined, deepest.text);
  t.deepEqual(deepest.body.data.devices.data, []);
});

test.serial(
  'the same operation text is priced with each request’s variables (cached parse and validation)',
  async (t) => {
    const s = stack();
    const { token } = await admin();
    const Q =
      'query($limit: Int!, $first: Int!) { trips(limit: $limit) { data { id gpsPoints(first: $first) { nodes { id } } } } }';
    const ask = (limit: number, first: number) =>
      s.request('POST', '/v1/gql', { token, body: { query: Q, variables: { limit, first } } });
    for (const [limit, first, refused] of [
      [1, 1, false],
      [100, 1000, true],
      [1, 1, false],
      [100, 1000, true],
    ] as const) {
      const r = await ask(limit, first);
      t.is(r.status, 200, r.text);
      if (refused) t.is(r.body.errors[0].extensions.code, 'QUERY_TOO_COMPLEX', r.text);
      else t.is(r.body.errors, undefined, r.text);
    }
    // An invalid operation answers the same error every time; a mutation over GET stays refused.
    for (let i = 0; i < 2; i++) {
      const bad = await s.request('POST', '/v1/gql', { token, body: { query: '{ noSuchField }' } });
      t.is(bad.body.errors[0].extensions.code, 'GRAPHQL_VALIDATION_FAILED', bad.text);
      const syntax = await s.request('POST', '/v1/gql', { token, body: { query: '{ me {' } });
      t.is(syntax.body.errors[0].extensions.code, 'GRAPHQL_PARSE_FAILED', syntax.text);
      const viaGet = await s.request(
        'GET',
        `/v1/gql?query=${encodeURIComponent('mutation { mintWsTicket { ticket } }')}`,
        { token },
      );
      t.is(viaGet.status, 405, viaGet.text);
    }
  },
);

test('introspection is allowed (as GraphiQL sends it)', async (t) => {
  const s = stack();
  const { getIntrospectionQuery } = await import('graphql');
  const r = await s.request('POST', '/v1/gql', { body: { query: getIntrospectionQuery() } });
  t.is(r.status, 200, r.text.slice(0, 300));
  t.true(r.body.data.__schema.types.some((ty: { name: string }) => ty.name === 'Trip'));
});

test('introspection is bounded per operation: one __schema, 20 __type, aliases and fragments counted', async (t) => {
  const s = stack();
  const one = '__schema{types{fields{type{fields{type{name}}}}}}';
  // 280 aliased copies once answered 3.4 MB after 2 s of the event loop, anonymously.
  const bomb = `{${Array.from({ length: 280 }, (_, i) => `a${i}:${one}`).join(' ')}}`;
  const refused = await s.request('POST', '/v1/gql', { body: { query: bomb } });
  t.is(refused.body.errors[0].extensions.code, 'QUERY_TOO_COMPLEX', refused.text.slice(0, 300));
  t.regex(refused.body.errors[0].message, /at most 1 __schema and 20 __type; this one asks for 280 and 0/);
  t.is(refused.body.data, undefined);
  // Through fragments too.
  const viaFragments = await s.request('POST', '/v1/gql', {
    body: { query: `{ ...A ...B } fragment A on Query { x: ${one} } fragment B on Query { y: ${one} }` },
  });
  t.is(viaFragments.body.errors[0].extensions.code, 'QUERY_TOO_COMPLEX');
  const types = `{${Array.from({ length: 21 }, (_, i) => `t${i}: __type(name: "Trip") { name }`).join(' ')}}`;
  t.is(
    (await s.request('POST', '/v1/gql', { body: { query: types } })).body.errors[0].extensions.code,
    'QUERY_TOO_COMPLEX',
  );
  // Within the bounds: answered.
  const fine = await s.request('POST', '/v1/gql', {
    body: { query: `{ ${one} t: __type(name: "Trip") { name } }` },
  });
  t.is(fine.status, 200, fine.text.slice(0, 300));
  t.is(fine.body.data.t.name, 'Trip');
});

test('whole-table lists (roles, trip templates, the category tree) may be asked for once per operation', async (t) => {
  const s = stack();
  const { token } = await admin();
  for (const field of ['roles { id name }', 'tripTemplates { id name }', 'tripCategories { id name }']) {
    const name = field.split(' ')[0];
    // 30 aliases of one whole table over 20,000 rows answered 90 MB after 5 s of the event loop.
    const many = `{${Array.from({ length: 30 }, (_, i) => `a${i}: ${field}`).join(' ')}}`;
    const refused = await s.request('POST', '/v1/gql', { token, body: { query: many } });
    t.is(refused.body.errors[0].extensions.code, 'QUERY_TOO_COMPLEX');
    t.regex(refused.body.errors[0].message, new RegExp(`${name} 30 times`));
    const viaFragments = await s.request('POST', '/v1/gql', {
      token,
      body: { query: `{ ...A x: ${field} } fragment A on Query { ${field} }` },
    });
    t.is(viaFragments.body.errors?.[0].extensions.code, 'QUERY_TOO_COMPLEX', viaFragments.text.slice(0, 300));
    const once = await s.request('POST', '/v1/gql', { token, body: { query: `{ ${field} }` } });
    t.is(once.status, 200, once.text.slice(0, 300));
    t.true(Array.isArray(once.body.data[name]));
  }
  // A category answers its whole subtree: a top-level one can be the whole table.
  const categories = `{${Array.from({ length: 30 }, (_, i) => `c${i}: tripCategory(id: "root") { id children { id } }`).join(' ')}}`;
  const refusedCategory = await s.request('POST', '/v1/gql', { token, body: { query: categories } });
  t.is(refusedCategory.body.errors?.[0].extensions.code, 'QUERY_TOO_COMPLEX', refusedCategory.text.slice(0, 300));
  // A category's children are a whole subtree too, at any depth: 30 aliases of `children` under
  // one allowed tripCategory answered 168 MB after 12 s over 20,000 children.
  const kids = (n: number) => Array.from({ length: n }, (_, i) => `k${i}: children { id name }`).join(' ');
  for (const query of [
    `{ tripCategory(id: "root") { id ${kids(30)} } }`,
    `{ tripCategories { id children { id ${kids(2)} } } }`,
    `{ tripCategories { id ...K } } fragment K on TripCategory { children { id } other: children { id } }`,
  ]) {
    const refused = await s.request('POST', '/v1/gql', { token, body: { query } });
    t.is(refused.body.errors?.[0].extensions.code, 'QUERY_TOO_COMPLEX', refused.text.slice(0, 300));
    t.regex(refused.body.errors[0].message, /children \d+ times/);
  }
  // One key per level, nested: each level answers other categories, the tree at most once.
  const nested = await s.request('POST', '/v1/gql', {
    token,
    body: { query: '{ tripCategories { id children { id children { id children { id } } } } }' },
  });
  t.is(nested.body.errors, undefined, nested.text.slice(0, 300));
  t.true(Array.isArray(nested.body.data.tripCategories));
  // Below the root only `children` is limited: the caller's own role names are not a table.
  const mine = await s.request('POST', '/v1/gql', { token, body: { query: '{ me { roles roleNames: roles } }' } });
  t.is(mine.body.errors, undefined, mine.text.slice(0, 300));
  t.deepEqual(mine.body.data.me.roles, mine.body.data.me.roleNames);
  // One of each in one operation is fine.
  const all = await s.request('POST', '/v1/gql', {
    token,
    body: { query: '{ roles { id } tripTemplates { id } tripCategories { id } }' },
  });
  t.is(all.status, 200, all.text.slice(0, 300));
});

test('/v1/gql is counted in the caller’s tier and answers RATE_LIMITED in GraphQL’s format', async (t) => {
  const { startStack } = await import('../helpers/stack');
  const s = await startStack({ env: { RATE_LIMIT_USER: '3', RATE_LIMIT_USER_WINDOW_SECONDS: '60' } });
  try {
    const user = await createUser(s.db);
    const statuses: number[] = [];
    let last;
    for (let i = 0; i < 4; i++) {
      last = await s.request('POST', '/v1/gql', { token: user.token, body: { query: '{ me { userId } }' } });
      statuses.push(last.status);
    }
    t.deepEqual(statuses, [200, 200, 200, 429]);
    t.is(last!.headers.get('x-ratelimit-limit'), '3');
    t.truthy(last!.headers.get('retry-after'));
    t.is(last!.body.errors[0].extensions.code, 'RATE_LIMITED');
  } finally {
    await s.close();
  }
});
