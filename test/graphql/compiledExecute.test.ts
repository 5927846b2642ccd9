import test from 'ava';
import { compiledRuns } from '../../api/graphql/compiledExecute';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody, make, nowSeconds } from '../helpers/tracking';

/**
 * An operation runs on graphql-js the first time its document is executed and compiled
 * (graphql-jit) from then on: every answer, errors included, must be byte for byte the same.
 */
const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' } });

test('compiled operations answer exactly as graphql-js does: data, errors, variables, fragments, directives', async (t) => {
  const s = stack();
  const [admin, user] = await Promise.all([
    createUser(s.db, { roles: ['role_admin'] }),
    createUser(s.db, { roles: ['role_user'] }),
  ]);
  const t0 = nowSeconds() - 600;
  for (let i = 0; i < 3; i++) {
    const trip = await make(s, admin.token, '/v1/trips', {
      name: `compiled ${i}`,
      tags: ['a', `t${i}`],
      weight_kg: 1.5 * i,
    });
    await s.request('POST', '/v1/gps/batch', {
      token: admin.token,
      body: {
        points: [0, 1, 2, 3].map((k) =>
          gpsBody({ device_id: `dev-${i}`, trip_id: trip.id, timestamp: t0 + k * 10, latitude: 50 + k / 100 }),
        ),
      },
    });
    if (i === 0)
      t.is(
        (await s.request('PATCH', `/v1/trips/${trip.id}`, { token: admin.token, body: { status: 'active' } })).status,
        200,
      );
  }
  const location = await make(s, admin.token, '/v1/locations', { name: 'Harbour', city: 'Bonn' });
  await make(s, admin.token, `/v1/locations/${location.id}/contacts`, { name: 'Ada', phone: '+49 1' });

  const cases: Array<{ name: string; token?: string; query: string; variables?: Record<string, unknown> }> = [
    {
      name: 'nested page with arguments, aliases and fragments',
      query: `query Page($first: Int!) {
        trips(limit: 5) { data { ...T pts: gpsPoints(first: $first) { nodes { id latitude longitude timestamp speedKmh altitude } pageInfo { hasNextPage endCursor } } history { oldStatus newStatus changedAt } } pagination { page limit total totalPages } }
      }
      fragment T on Trip { id name status tags weightKg startedAt createdAt __typename distanceKm durationSeconds }`,
      variables: { first: 2 },
    },
    {
      name: '@include and @skip',
      query: `query($with: Boolean!) { trips(limit: 2) { data { id name @include(if: $with) notes @skip(if: $with) } } }`,
      variables: { with: false },
    },
    {
      name: 'a refused nested argument: the trip answers, the field is null with its error',
      query: `{ trips(limit: 1) { data { id gpsPoints(first: 0) { nodes { id } } } } }`,
    },
    {
      name: 'a missing resource and a bad id',
      query: `{ a: trip(id: "00000000-0000-4000-8000-000000000000") { id } b: trip(id: "nope") { id } }`,
    },
    {
      name: 'bad variable value',
      query: `query($first: Int!) { trips(limit: 1) { data { gpsPoints(first: $first) { nodes { id } } } } }`,
      variables: { first: 'many' },
    },
    {
      name: 'location with contacts',
      query: `query($id: String!) { location(id: $id) { name city contacts { name phone } } }`,
      variables: { id: location.id },
    },
    {
      name: 'permission refused',
      token: user.token,
      query: `{ trips { data { id } } users { data { id } } me { userId roles } }`,
    },
    { name: 'anonymous', token: '', query: `{ me { userId } platforms { slug enabled } }` },
    {
      name: 'introspection of a type',
      query: `{ __type(name: "Trip") { name fields { name type { kind name ofType { name } } } } }`,
    },
  ];

  const before = compiledRuns();
  for (const c of cases) {
    const token = c.token === undefined ? admin.token : c.token || undefined;
    const answers = [];
    for (let run = 0; run < 3; run++) {
      const r = await s.request('POST', '/v1/gql', { token, body: { query: c.query, variables: c.variables } });
      answers.push({ status: r.status, text: r.text });
    }
    t.deepEqual(answers[1], answers[0], `${c.name}: compiled (second run) = graphql-js (first run)`);
    t.deepEqual(answers[2], answers[0], `${c.name}: third run`);
  }
  // Every case but the bad variable (refused before executing) ran compiled twice.
  t.true(compiledRuns() - before >= 2 * (cases.length - 1), `compiled runs: ${compiledRuns() - before}`);

  const page = await s.request('POST', '/v1/gql', {
    token: admin.token,
    body: { query: cases[0].query, variables: { first: 2 } },
  });
  t.is(page.body.data.trips.data.length, 3);
  t.is(page.body.data.trips.data[0].pts.nodes.length, 2);
  t.true(page.body.data.trips.data[0].pts.pageInfo.hasNextPage);
});
