import test from 'ava';
import { createKey, createUser, TestUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { make, once } from '../helpers/tracking';

const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_ANONYMOUS: '100000' } });

interface Callers {
  admin: TestUser;
  developer: TestUser;
  user: TestUser;
  other: TestUser;
}
const callers = once(async (): Promise<Callers> => {
  const db = stack().db;
  const [admin, developer, user, other] = await Promise.all([
    createUser(db, { roles: ['role_admin'] }),
    createUser(db, { roles: ['role_developer'] }),
    createUser(db),
    createUser(db),
  ]);
  return { admin, developer, user, other };
});

/** The first error's code, or 'ok' when the field answered. */
async function outcome(token: string | undefined, query: string, variables: Record<string, unknown> = {}) {
  const r = await stack().request('POST', '/v1/gql', { token, body: { query, variables } });
  if (r.status !== 200) return `HTTP ${r.status}`;
  return r.body.errors ? (r.body.errors[0].extensions.code as string) : 'ok';
}

type Who = 'anonymous' | 'user' | 'developer' | 'admin' | 'system';
const WHO: Who[] = ['anonymous', 'user', 'developer', 'admin', 'system'];

async function tokenOf(who: Who): Promise<string | undefined> {
  if (who === 'anonymous') return undefined;
  if (who === 'system') return stack().systemKey;
  return (await callers())[who].token;
}

/** Each read of the resources: what each caller gets (the permission of the REST read, system key never). */
const READS: Array<[string, string, Record<Who, string>]> = [
  [
    'platforms',
    '{ platforms { id slug twoFactorSupported twoFactorRequired } }',
    { anonymous: 'ok', user: 'ok', developer: 'ok', admin: 'ok', system: 'FORBIDDEN' },
  ],
  [
    'roles',
    '{ roles { id name requiresTwoFactor } }',
    { anonymous: 'UNAUTHENTICATED', user: 'FORBIDDEN', developer: 'ok', admin: 'ok', system: 'FORBIDDEN' },
  ],
  [
    'me',
    '{ me { userId apiKeyId roles permissions isSuperAdmin } }',
    { anonymous: 'UNAUTHENTICATED', user: 'ok', developer: 'ok', admin: 'ok', system: 'ok' },
  ],
  [
    'users',
    '{ users { data { id } pagination { total } } }',
    { anonymous: 'UNAUTHENTICATED', user: 'FORBIDDEN', developer: 'FORBIDDEN', admin: 'ok', system: 'FORBIDDEN' },
  ],
  [
    'devices',
    '{ devices { data { id name } } }',
    { anonymous: 'UNAUTHENTICATED', user: 'FORBIDDEN', developer: 'ok', admin: 'ok', system: 'FORBIDDEN' },
  ],
  [
    'trips',
    '{ trips { data { id history { newStatus } gpsPoints(first: 2) { nodes { id } } } } }',
    { anonymous: 'UNAUTHENTICATED', user: 'FORBIDDEN', developer: 'ok', admin: 'ok', system: 'FORBIDDEN' },
  ],
  [
    'geofences',
    '{ geofences { data { id metadata } } }',
    { anonymous: 'UNAUTHENTICATED', user: 'FORBIDDEN', developer: 'ok', admin: 'ok', system: 'FORBIDDEN' },
  ],
  [
    'locations',
    '{ locations { data { id contacts { name } } } }',
    { anonymous: 'UNAUTHENTICATED', user: 'FORBIDDEN', developer: 'ok', admin: 'ok', system: 'FORBIDDEN' },
  ],
  [
    'tripCategories',
    '{ tripCategories { id children { id } } }',
    { anonymous: 'UNAUTHENTICATED', user: 'FORBIDDEN', developer: 'ok', admin: 'ok', system: 'FORBIDDEN' },
  ],
  [
    'tripTemplates',
    '{ tripTemplates { id name } }',
    { anonymous: 'UNAUTHENTICATED', user: 'FORBIDDEN', developer: 'ok', admin: 'ok', system: 'FORBIDDEN' },
  ],
];

for (const [name, query, expected] of READS) {
  test(`${name}: anonymous, user, developer, admin, system key`, async (t) => {
    const got: Record<string, string> = {};
    for (const who of WHO) got[who] = await outcome(await tokenOf(who), query);
    t.deepEqual(got, expected);
  });
}

test('resources read through GraphQL show the REST presenters’ data in camelCase', async (t) => {
  const s = stack();
  const { developer } = await callers();
  const device = await make(s, developer.token, '/v1/devices', { name: 'gql boat' });
  const location = await make(s, developer.token, '/v1/locations', {
    name: 'Harbour',
    city: 'Kiel',
    contacts: [{ name: 'Zoe', phone: '+49 1' }, { name: 'Anna' }],
  });
  const parent = await make(s, developer.token, '/v1/trip-categories', { name: 'Sea' });
  const child = await make(s, developer.token, '/v1/trip-categories', { name: 'Coastal', parent_id: parent.id });
  const trip = await make(s, developer.token, '/v1/trips', { name: 'gql trip', device_id: device.id, tags: ['a'] });
  const geofence = await make(s, developer.token, '/v1/geofences', {
    name: 'Fence',
    latitude: 54.3,
    longitude: 10.1,
    radius_km: 2,
    metadata: { zone: 'harbour' },
  });

  const r = await s.request('POST', '/v1/gql', {
    token: developer.token,
    body: {
      query: `query($d: String!, $l: String!, $t: String!, $g: String!) {
        device(id: $d) { id name isActive apiKeyId createdAt }
        location(id: $l) { name city contacts { name phone locationId } }
        trip(id: $t) { name status deviceId tags distanceKm durationSeconds history { newStatus } }
        geofence(id: $g) { radiusKm metadata }
        tripCategories { name children { name parentId } }
      }`,
      variables: { d: device.id, l: location.id, t: trip.id, g: geofence.id },
    },
  });
  t.falsy(r.body.errors, r.text);
  const d = r.body.data;
  t.deepEqual(d.device, {
    id: device.id,
    name: 'gql boat',
    isActive: device.is_active,
    apiKeyId: null,
    createdAt: device.created_at,
  });
  t.deepEqual(d.location, {
    name: 'Harbour',
    city: 'Kiel',
    contacts: [
      { name: 'Anna', phone: null, locationId: location.id },
      { name: 'Zoe', phone: '+49 1', locationId: location.id },
    ],
  });
  t.deepEqual(d.trip, {
    name: 'gql trip',
    status: 'draft',
    deviceId: device.id,
    tags: ['a'],
    distanceKm: 0,
    durationSeconds: 0,
    history: [],
  });
  t.deepEqual(d.geofence, { radiusKm: 2, metadata: { zone: 'harbour' } });
  const sea = d.tripCategories.find((c: { name: string }) => c.name === 'Sea');
  t.deepEqual(sea.children, [{ name: 'Coastal', parentId: parent.id }]);
  t.false(d.tripCategories.some((c: { name: string }) => c.name === child.name));
});

test('user(id): oneself, not another user, anyone with users:read; never the system key', async (t) => {
  const { user, other, admin } = await callers();
  const Q = 'query($id: String!) { user(id: $id) { id username deletedAt privacyMode } }';
  t.is(await outcome(undefined, Q, { id: user.id }), 'UNAUTHENTICATED');
  t.is(await outcome(user.token, Q, { id: user.id }), 'ok');
  t.is(await outcome(user.token, Q, { id: other.id }), 'FORBIDDEN');
  t.is(await outcome(admin.token, Q, { id: other.id }), 'ok');
  t.is(await outcome(stack().systemKey, Q, { id: other.id }), 'FORBIDDEN');
  t.is(await outcome(admin.token, Q, { id: '00000000-0000-4000-8000-000000000001' }), 'NOT_FOUND');
  const r = await stack().request('POST', '/v1/gql', {
    token: user.token,
    body: { query: Q, variables: { id: user.id } },
  });
  t.deepEqual(r.body.data.user, { id: user.id, username: user.username, deletedAt: null, privacyMode: false });
});

test('users pages like GET /v1/users', async (t) => {
  const { admin } = await callers();
  const r = await stack().request('POST', '/v1/gql', {
    token: admin.token,
    body: { query: '{ users(page: 2, limit: 1) { data { id } pagination { page limit total totalPages } } }' },
  });
  const rest = await stack().request('GET', '/v1/users?page=2&limit=1', { token: admin.token });
  t.deepEqual(r.body.data.users.data, [{ id: rest.body.data[0].id }]);
  t.deepEqual(r.body.data.users.pagination, {
    page: 2,
    limit: 1,
    total: rest.body.pagination.total,
    totalPages: rest.body.pagination.total_pages,
  });
});

test('roles shows requiresTwoFactor', async (t) => {
  const s = stack();
  const { admin } = await callers();
  await s.db('roles').where('id', 'role_moderator').update({ requires_two_factor: true });
  const r = await s.request('POST', '/v1/gql', {
    token: admin.token,
    body: { query: '{ roles { id name requiresTwoFactor } }' },
  });
  const mod = r.body.data.roles.find((x: { id: string }) => x.id === 'role_moderator');
  t.deepEqual(mod, { id: 'role_moderator', name: 'Moderator', requiresTwoFactor: true });
  t.true(r.body.data.roles.some((x: { requiresTwoFactor: boolean }) => !x.requiresTwoFactor));
});

test('mintWsTicket: users only (anonymous UNAUTHENTICATED, system key and API keys FORBIDDEN)', async (t) => {
  const { user } = await callers();
  const Q = 'mutation { mintWsTicket { ticket expiresIn } }';
  t.is(await outcome(undefined, Q), 'UNAUTHENTICATED');
  t.is(await outcome(stack().systemKey, Q), 'FORBIDDEN');
  const key = await createKey({ userId: user.id, scopes: ['api_keys:read'] });
  t.is(await outcome(key.key, Q), 'FORBIDDEN');
  const r = await stack().request('POST', '/v1/gql', { token: user.token, body: { query: Q } });
  t.regex(r.body.data.mintWsTicket.ticket, /.{20,}/);
  t.true(r.body.data.mintWsTicket.expiresIn > 0);
});

test('oauthSignin: the system key only', async (t) => {
  const { admin, user } = await callers();
  const Q = `mutation($i: OauthSigninInput!) { oauthSignin(input: $i) { id username platform email } }`;
  const input = {
    i: { name: 'Gql Person', oauthProvider: 'github', oauthProviderId: 'gql-1', email: 'gql1@example.test' },
  };
  t.is(await outcome(undefined, Q, input), 'UNAUTHENTICATED');
  t.is(await outcome(user.token, Q, input), 'UNAUTHENTICATED');
  t.is(await outcome(admin.token, Q, input), 'UNAUTHENTICATED');
  const r = await stack().request('POST', '/v1/gql', {
    token: stack().systemKey,
    body: { query: Q, variables: input },
  });
  t.falsy(r.body.errors, r.text);
  t.is(r.body.data.oauthSignin.platform, 'github');
});

test('a refused root field is null with its error; the other fields of the request still answer', async (t) => {
  const { user } = await callers();
  const anonymous = await stack().request('POST', '/v1/gql', {
    body: { query: '{ platforms { slug } me { userId } }' },
  });
  t.true(anonymous.body.data.platforms.length > 0, anonymous.text);
  t.is(anonymous.body.data.me, null);
  t.is(anonymous.body.errors[0].extensions.code, 'UNAUTHENTICATED');
  t.deepEqual(anonymous.body.errors[0].path, ['me']);
  const narrow = await stack().request('POST', '/v1/gql', {
    token: user.token,
    body: { query: '{ me { userId } roles { id } trips { data { id } } }' },
  });
  t.is(narrow.body.data.me.userId, user.id, narrow.text);
  t.is(narrow.body.data.roles, null);
  t.is(narrow.body.data.trips, null);
  t.deepEqual(narrow.body.errors.map((e: { path: string[] }) => e.path[0]).sort(), ['roles', 'trips']);
});

test('a malformed id argument is a 400 naming it, as REST names its path id', async (t) => {
  const { admin } = await callers();
  for (const field of ['user', 'trip', 'device', 'geofence', 'location', 'tripCategory']) {
    const r = await stack().request('POST', '/v1/gql', {
      token: admin.token,
      body: { query: `{ ${field}(id: "x") { id } }` },
    });
    t.is(r.body.errors[0].message, 'id: must be a UUID', field);
    t.is(r.body.errors[0].extensions.code, 'BAD_USER_INPUT', field);
    t.deepEqual(r.body.data, { [field]: null }, field);
  }
});

test('findUserByPlatform: system key and users:read find anyone, a user only themselves', async (t) => {
  const { admin, user, other } = await callers();
  const Q = 'query($e: String!) { findUserByPlatform(platformSlug: "email", platformUserId: $e) }';
  t.is(await outcome(undefined, Q, { e: other.email }), 'UNAUTHENTICATED');
  t.is(await outcome(user.token, Q, { e: other.email }), 'FORBIDDEN');
  // A user finds their own account; an unlinked one is refused like another user's (nothing leaks).
  const own = await stack().request('POST', '/v1/gql', {
    token: user.token,
    body: { query: Q, variables: { e: user.email } },
  });
  t.is(own.body.data?.findUserByPlatform, user.id, own.text);
  t.is(await outcome(user.token, Q, { e: 'nobody@example.test' }), 'FORBIDDEN');
  for (const token of [admin.token, stack().systemKey]) {
    const r = await stack().request('POST', '/v1/gql', { token, body: { query: Q, variables: { e: other.email } } });
    t.is(r.body.data.findUserByPlatform, other.id);
  }
});

test('createAuditEvent / logAuditEvent: system key and audit:write', async (t) => {
  const { admin, developer } = await callers();
  for (const op of ['createAuditEvent', 'logAuditEvent']) {
    const Q = `mutation($i: AuditEventInput!) { ${op}(input: $i) { id eventType } }`;
    const v = { i: { eventType: 'logout' } };
    t.is(await outcome(undefined, Q, v), 'UNAUTHENTICATED', op);
    t.is(await outcome(developer.token, Q, v), 'FORBIDDEN', op);
    t.is(await outcome(admin.token, Q, v), 'ok', op);
    t.is(await outcome(stack().systemKey, Q, v), 'ok', op);
  }
});

test('deleteGpsData: gps:delete; never the system key', async (t) => {
  const { admin, developer } = await callers();
  const Q = 'mutation { deleteGpsData(deviceId: "nothing-here") { deleted keptOnTrips } }';
  t.is(await outcome(undefined, Q), 'UNAUTHENTICATED');
  t.is(await outcome(developer.token, Q), 'FORBIDDEN');
  t.is(await outcome(stack().systemKey, Q), 'FORBIDDEN');
  t.is(await outcome(admin.token, Q), 'ok');
});

test('an API key reaches the reads its scopes name, nothing more', async (t) => {
  const { admin } = await callers();
  const key = await createKey({ userId: admin.id, scopes: ['trips:read'] });
  t.is(await outcome(key.key, '{ trips { data { id } } }'), 'ok');
  t.is(await outcome(key.key, '{ devices { data { id } } }'), 'FORBIDDEN');
  t.is(await outcome(key.key, '{ users { data { id } } }'), 'FORBIDDEN');
});
