import test from 'ava';
import { execute, GraphQLSchema, parse } from 'graphql';
import { randomUUID } from 'node:crypto';
import { buildGraphqlSchema } from '../../api/graphql';
import type { GqlContext } from '../../api/graphql/context';
import { createLoaders } from '../../api/graphql/loaders';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { statementsOn as helperStatementsOn } from '../helpers/statements';
import { make } from '../helpers/tracking';

const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000' } });

const statementsOn = <T>(table: string, fn: () => PromiseLike<T>) => helperStatementsOn(stack().db, table, fn);

let schema: GraphQLSchema | undefined;

/**
 * Runs `query` `n` times for the caller of `token`, all started in one turn of the event loop, on
 * the api's own services (its schema and resolvers): how many statements concurrent callers cost,
 * whatever the load on the machine (over HTTP, how requests fall into turns varies).
 */
async function inOneTurn(token: string, query: string, n: number) {
  schema ??= await buildGraphqlSchema();
  const services = stack().api.services;
  const resolved = await services.credentials.resolve(token);
  if (!resolved.ok) throw new Error('credential did not resolve');
  const document = parse(query);
  const context = (): GqlContext => ({
    principal: resolved.principal,
    services,
    ip: '127.0.0.1',
    userAgent: null,
    header: () => null,
    loaders: createLoaders(services.db),
  });
  return Promise.all(Array.from({ length: n }, () => execute({ schema: schema!, document, contextValue: context() })));
}

const gql = (token: string, query: string) =>
  stack()
    .request('POST', '/v1/gql', { token, body: { query } })
    .then((r) => r.body);

test.serial('me: concurrent callers share one roles read; each gets its own role names, sorted', async (t) => {
  const db = stack().db;
  const [a, b, c] = await Promise.all([
    createUser(db, { roles: ['role_user', 'role_developer'] }),
    createUser(db, { roles: ['role_moderator'] }),
    createUser(db, { roles: [] }),
  ]);
  // Warm the credentials, so only the resolvers' reads are counted.
  await Promise.all([a, b, c].map((u) => gql(u.token, '{ me { userId } }')));
  const callers = [a, b, c, a, b, c];
  const result = await Promise.all(callers.map((u) => gql(u.token, '{ me { userId roles } }')));
  const names = async (ids: string[]) =>
    (await db('roles').whereIn('id', ids).select('name')).map((r: { name: string }) => r.name as string).sort();
  const expected = new Map([
    [a.id, await names(['role_user', 'role_developer'])],
    [b.id, await names(['role_moderator'])],
    [c.id, []],
  ]);
  result.forEach((body, i) => {
    t.falsy(body.errors);
    t.is(body.data.me.userId, callers[i].id);
    t.deepEqual(body.data.me.roles, expected.get(callers[i].id));
  });
  const { result: direct, count } = await statementsOn('roles', () => inOneTurn(a.token, '{ me { userId roles } }', 8));
  for (const r of direct) t.deepEqual(r.data?.me, { userId: a.id, roles: expected.get(a.id) });
  t.is(count, 1, 'eight me queries of one turn: one statement on roles');
});

test.serial(
  'trip(id): stats come with the trip; an unknown id is NOT_FOUND, a malformed one BAD_USER_INPUT',
  async (t) => {
    const s = stack();
    const user = await createUser(s.db, { roles: ['role_developer'] });
    const trip = await make(s, user.token, '/v1/trips', { name: 'GraphQL trip' });
    const now = Math.floor(Date.now() / 1000);
    for (const [i, lat] of [52.5, 52.51].entries())
      await make(s, user.token, '/v1/gps', {
        latitude: lat,
        longitude: 13.4,
        altitude: 0,
        heading: 0,
        timestamp: now + i * 60,
        speed_kmh: 0,
        speed_mps: 0,
        speed_mph: 0,
        speed_knots: 0,
        trip_id: trip.id,
      });
    const body = await gql(user.token, `{ trip(id: "${trip.id}") { id distanceKm durationSeconds } }`);
    t.falsy(body.errors);
    t.is(body.data.trip.id, trip.id);
    t.true(body.data.trip.distanceKm > 1 && body.data.trip.distanceKm < 1.2);
    t.is(body.data.trip.durationSeconds, 60);
    const missing = await gql(user.token, `{ trip(id: "${randomUUID()}") { id } }`);
    t.is(missing.errors[0].extensions.code, 'NOT_FOUND');
    const malformed = await gql(user.token, '{ trip(id: "not-a-uuid") { id } }');
    t.is(malformed.errors[0].extensions.code, 'BAD_USER_INPUT');
  },
);

test.serial(
  'roles, templates, categories and platforms: concurrent callers share a read, and a change shows at once',
  async (t) => {
    const s = stack();
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    await gql(admin.token, '{ me { userId } }');
    const { result, count } = await statementsOn('roles', () =>
      Promise.all(Array.from({ length: 6 }, () => gql(admin.token, '{ roles { id name } }'))),
    );
    for (const body of result) t.deepEqual(body.data.roles, result[0].data.roles);
    t.true(count <= 2, `${count} statements on roles for 6 concurrent lists`);
    // A role created just before the next request is in its answer.
    const name = `Shared ${Date.now()}`;
    await s.db('roles').insert({ id: `role_shared_${Date.now()}`, name, description: 'x' });
    const after = await gql(admin.token, '{ roles { name } }');
    t.true(after.data.roles.some((r: { name: string }) => r.name === name));

    const category = `Cat ${Date.now()}`;
    const template = `Tpl ${Date.now()}`;
    await make(s, admin.token, '/v1/trip-categories', { name: category });
    await make(s, admin.token, '/v1/trip-templates', { name: template });
    const lists = await gql(admin.token, '{ tripCategories { name } tripTemplates { name } platforms { slug } }');
    t.falsy(lists.errors);
    t.true(lists.data.tripCategories.some((c: { name: string }) => c.name === category));
    t.true(lists.data.tripTemplates.some((c: { name: string }) => c.name === template));
    t.true(lists.data.platforms.some((p: { slug: string }) => p.slug === 'email'));
  },
);

test.serial('a page past the end (an empty list): callers share its total read, which stays exact', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  await gql(admin.token, '{ me { userId } }');
  const total = Number((await s.db('trips').count('* as n'))[0].n);
  const page = Math.ceil(total / 100) + 5;
  const query = `{ trips(limit: 100, page: ${page}) { data { id } pagination { total } } }`;
  const body = await gql(admin.token, query);
  t.falsy(body.errors);
  t.deepEqual(body.data.trips.data, []);
  t.is(body.data.trips.pagination.total, total);
  const { result, count } = await statementsOn('row_counters', () => inOneTurn(admin.token, query, 8));
  for (const r of result) t.deepEqual(r.data?.trips, body.data.trips);
  // The page, then the total alone: one statement each for the eight callers, not sixteen.
  t.is(count, 2);
});
