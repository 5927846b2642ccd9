import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { make, once } from '../helpers/tracking';

const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000' } });
const users = once(async () => {
  const s = stack();
  const [admin, developer, reader] = await Promise.all([
    createUser(s.db, { roles: ['role_admin'] }),
    createUser(s.db, { roles: ['role_developer'] }),
    createUser(s.db, { roles: ['role_api_read_only'] }),
  ]);
  return { admin, developer, reader };
});
const MISSING = '00000000-0000-4000-8000-000000000000';

test('locations: create with inline contacts, get with contacts, list by name without them', async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const r = await s.request('POST', '/v1/locations', {
    token: developer.token,
    body: {
      name: 'Hamburg Port',
      street: 'Kai 1',
      zip: '20457',
      city: 'Hamburg',
      country: 'de',
      latitude: 53.54,
      longitude: 9.98,
      notes: 'gate 3',
      contacts: [
        { name: 'Zoe', phone: '+49 40 1', role: 'Dispatcher' },
        { name: 'adam', email: 'adam@example.test' },
      ],
    },
  });
  t.is(r.status, 201, r.text);
  const loc = r.body.data;
  t.is(loc.country, 'DE');
  t.is(loc.is_active, true);
  t.deepEqual(
    loc.contacts.map((c: { name: string }) => c.name),
    ['adam', 'Zoe'],
  );
  t.deepEqual(Object.keys(loc.contacts[0]).sort(), [
    'created_at',
    'email',
    'id',
    'location_id',
    'name',
    'phone',
    'role',
  ]);
  t.is(loc.contacts[1].role, 'Dispatcher');
  const got = await s.request('GET', `/v1/locations/${loc.id}`, { token: reader.token });
  t.deepEqual(got.body.data, loc);
  await make(s, developer.token, '/v1/locations', { name: 'aachen depot' });
  await make(s, developer.token, '/v1/locations', { name: 'Zwickau' });
  const list = await s.request('GET', '/v1/locations?limit=100', { token: reader.token });
  const names = list.body.data.map((l: { name: string }) => l.name);
  t.deepEqual(
    names,
    [...names].sort((a: string, b: string) => a.toLowerCase().localeCompare(b.toLowerCase())),
  );
  t.false('contacts' in list.body.data[0]);
  t.is((await s.request('GET', '/v1/locations', { token: reader.token })).body.pagination.limit, 10);
  t.is((await s.request('GET', '/v1/locations?limit=101', { token: reader.token })).status, 400);
});

test('locations: bad input, PATCH (at least one, no contacts), delete, 404s and permissions', async (t) => {
  const s = stack();
  const { developer, reader, admin } = await users();
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{}, /^name: Required/],
    [{ name: 'x', latitude: 95 }, /^latitude: /],
    [{ name: 'x', longitude: -181 }, /^longitude: /],
    [{ name: 'x', country: 'Germany' }, /^country: /],
    [{ name: 'x', contacts: [{ phone: '1' }] }, /^contacts\.0\.name: Required/],
    [{ name: 'x', contacts: [{ name: 'a', email: 'not-an-email' }] }, /^contacts\.0\.email: /],
  ];
  for (const [body, re] of cases) {
    const r = await s.request('POST', '/v1/locations', { token: developer.token, body });
    t.is(r.status, 400, JSON.stringify(body));
    t.regex(r.body.message, re);
  }
  t.is((await s.request('POST', '/v1/locations', { token: reader.token, body: { name: 'x' } })).status, 403);
  const loc = await make(s, developer.token, '/v1/locations', {
    name: 'Patchable',
    city: 'Kiel',
    contacts: [{ name: 'C' }],
  });
  const empty = await s.request('PATCH', `/v1/locations/${loc.id}`, { token: developer.token, body: {} });
  t.is(empty.status, 400);
  t.regex(empty.body.message, /at least one/);
  const p = await s.request('PATCH', `/v1/locations/${loc.id}`, {
    token: developer.token,
    body: { is_active: false, notes: 'closed' },
  });
  t.is(p.status, 200);
  t.like(p.body.data, { is_active: false, notes: 'closed', city: 'Kiel', name: 'Patchable' });
  t.is(p.body.data.contacts.length, 1);
  t.is(
    (await s.request('PATCH', `/v1/locations/${MISSING}`, { token: developer.token, body: { name: 'x' } })).status,
    404,
  );
  t.is((await s.request('GET', `/v1/locations/${MISSING}`, { token: reader.token })).status, 404);
  t.is((await s.request('DELETE', `/v1/locations/${loc.id}`, { token: developer.token })).status, 403);
  // A trip referencing the location keeps existing without it.
  const trip = await make(s, developer.token, '/v1/trips', { name: 'to Kiel', destination_id: loc.id });
  t.is((await s.request('DELETE', `/v1/locations/${loc.id}`, { token: admin.token })).status, 204);
  t.is((await s.request('GET', `/v1/trips/${trip.id}`, { token: reader.token })).body.data.destination_id, null);
  t.is((await s.request('DELETE', `/v1/locations/${loc.id}`, { token: admin.token })).status, 404);
});

test('location contacts: add, get (the self link), patch (at least one), delete; scoped to their location', async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const loc = await make(s, developer.token, '/v1/locations', { name: 'With contacts' });
  const other = await make(s, developer.token, '/v1/locations', { name: 'Other' });
  // The location with its contacts is a cached answer (README "Hot paths"): every contact write
  // below, and one made straight in SQL, shows on the very next read.
  const contactsNow = async () =>
    (
      (await s.request('GET', `/v1/locations/${loc.id}`, { token: reader.token })).body.data.contacts as Array<{
        name: string;
        email: string | null;
      }>
    ).map((x) => `${x.name}:${x.email}`);
  t.deepEqual(await contactsNow(), []);
  const c = await s.request('POST', `/v1/locations/${loc.id}/contacts`, {
    token: developer.token,
    body: { name: 'Mia', phone: '123', role: 'Harbour master' },
  });
  t.is(c.status, 201);
  t.is(c.body.data.location_id, loc.id);
  t.is(c.body._links.self, `/v1/locations/${loc.id}/contacts/${c.body.data.id}`);
  const cid = c.body.data.id;
  t.deepEqual(await contactsNow(), ['Mia:null']);
  // The self link answers the contact: locations:read, and only through its own location.
  const self = await s.request('GET', c.body._links.self, { token: reader.token });
  t.is(self.status, 200, self.text);
  t.deepEqual(self.body, c.body);
  t.is((await s.request('GET', `/v1/locations/${other.id}/contacts/${cid}`, { token: reader.token })).status, 404);
  t.is((await s.request('GET', `/v1/locations/${loc.id}/contacts/${MISSING}`, { token: reader.token })).status, 404);
  const noTracking = await createUser(s.db);
  t.is((await s.request('GET', c.body._links.self, { token: noTracking.token })).status, 403);
  t.is(
    (await s.request('POST', `/v1/locations/${loc.id}/contacts`, { token: developer.token, body: { phone: '1' } }))
      .status,
    400,
  );
  t.is(
    (await s.request('POST', `/v1/locations/${MISSING}/contacts`, { token: developer.token, body: { name: 'x' } }))
      .status,
    404,
  );
  t.is(
    (await s.request('POST', `/v1/locations/${loc.id}/contacts`, { token: reader.token, body: { name: 'x' } })).status,
    403,
  );
  const empty = await s.request('PATCH', `/v1/locations/${loc.id}/contacts/${cid}`, {
    token: developer.token,
    body: {},
  });
  t.is(empty.status, 400);
  const p = await s.request('PATCH', `/v1/locations/${loc.id}/contacts/${cid}`, {
    token: developer.token,
    body: { email: 'mia@example.test' },
  });
  t.like(p.body.data, { name: 'Mia', phone: '123', email: 'mia@example.test', role: 'Harbour master' });
  t.deepEqual((await s.request('GET', p.body._links.self, { token: reader.token })).body, p.body);
  t.deepEqual(await contactsNow(), ['Mia:mia@example.test']);
  await s.db('location_contacts').where({ id: cid }).update({ name: 'Mia in SQL' });
  t.deepEqual(await contactsNow(), ['Mia in SQL:mia@example.test']);
  // The contact alone is a cached answer too: the write in SQL shows at once.
  t.is((await s.request('GET', p.body._links.self, { token: reader.token })).body.data.name, 'Mia in SQL');
  t.is(
    (
      await s.request('PATCH', `/v1/locations/${other.id}/contacts/${cid}`, {
        token: developer.token,
        body: { name: 'x' },
      })
    ).status,
    404,
  );
  t.is(
    (await s.request('DELETE', `/v1/locations/${other.id}/contacts/${cid}`, { token: developer.token })).status,
    404,
  );
  t.is((await s.request('DELETE', `/v1/locations/${loc.id}/contacts/${cid}`, { token: developer.token })).status, 204);
  t.is((await s.request('DELETE', `/v1/locations/${loc.id}/contacts/${cid}`, { token: developer.token })).status, 404);
  t.is((await s.request('GET', `/v1/locations/${loc.id}/contacts/${cid}`, { token: reader.token })).status, 404);
  t.deepEqual((await s.request('GET', `/v1/locations/${loc.id}`, { token: reader.token })).body.data.contacts, []);
});

test('geofences: radius_km > 0, metadata any JSON object, PATCH at least one, pagination, permissions', async (t) => {
  const s = stack();
  const { developer, reader, admin } = await users();
  const r = await s.request('POST', '/v1/geofences', {
    token: developer.token,
    body: {
      name: 'Harbour',
      latitude: 53.5,
      longitude: 9.9,
      radius_km: 1.5,
      metadata: { zone: 'A', nested: { speed_limit: 8 }, list: [1, 2] },
    },
  });
  t.is(r.status, 201, r.text);
  const g = r.body.data;
  t.deepEqual(g.metadata, { zone: 'A', nested: { speed_limit: 8 }, list: [1, 2] });
  t.is(g.is_active, true);
  t.deepEqual(Object.keys(g).sort(), [
    'created_at',
    'description',
    'id',
    'is_active',
    'latitude',
    'longitude',
    'metadata',
    'min_dwell_seconds',
    'name',
    'radius_km',
    'updated_at',
  ]);
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ name: 'x', latitude: 1, longitude: 1, radius_km: 0 }, /^radius_km: must be greater than 0/],
    [{ name: 'x', latitude: 1, longitude: 1, radius_km: -2 }, /^radius_km: /],
    [{ name: 'x', latitude: 1, longitude: 1 }, /^radius_km: Required/],
    [{ name: 'x', longitude: 1, radius_km: 1 }, /^latitude: Required/],
    [{ name: 'x', latitude: 1, longitude: 1, radius_km: 1, metadata: [1] }, /^metadata: must be a JSON object/],
    [{ name: 'x', latitude: 1, longitude: 1, radius_km: 1, metadata: 'tag' }, /^metadata: must be a JSON object/],
    [{ latitude: 1, longitude: 1, radius_km: 1 }, /^name: Required/],
  ];
  for (const [body, re] of cases) {
    const res = await s.request('POST', '/v1/geofences', { token: developer.token, body });
    t.is(res.status, 400, JSON.stringify(body));
    t.regex(res.body.message, re);
  }
  t.is((await s.request('PATCH', `/v1/geofences/${g.id}`, { token: developer.token, body: {} })).status, 400);
  t.is(
    (await s.request('PATCH', `/v1/geofences/${g.id}`, { token: developer.token, body: { radius_km: 0 } })).status,
    400,
  );
  const p = await s.request('PATCH', `/v1/geofences/${g.id}`, {
    token: developer.token,
    body: { is_active: false, metadata: null },
  });
  t.like(p.body.data, { is_active: false, metadata: null, radius_km: 1.5, name: 'Harbour' });
  t.is((await s.request('GET', `/v1/geofences/${g.id}`, { token: reader.token })).body.data.is_active, false);
  t.is(
    (
      await s.request('POST', '/v1/geofences', {
        token: reader.token,
        body: { name: 'x', latitude: 1, longitude: 1, radius_km: 1 },
      })
    ).status,
    403,
  );
  for (let i = 0; i < 11; i++)
    await make(s, developer.token, '/v1/geofences', { name: `fence ${i}`, latitude: 0, longitude: 0, radius_km: 1 });
  const list = await s.request('GET', '/v1/geofences', { token: reader.token });
  t.is(list.body.data.length, 10);
  t.is(list.body.pagination.limit, 10);
  t.is((await s.request('GET', '/v1/geofences?limit=101', { token: reader.token })).status, 400);
  t.is((await s.request('DELETE', `/v1/geofences/${g.id}`, { token: developer.token })).status, 403);
  t.is((await s.request('DELETE', `/v1/geofences/${g.id}`, { token: admin.token })).status, 204);
  t.is((await s.request('GET', `/v1/geofences/${g.id}`, { token: reader.token })).status, 404);
  t.is(
    (await s.request('PATCH', `/v1/geofences/${g.id}`, { token: developer.token, body: { name: 'x' } })).status,
    404,
  );
});

test('geofences: metadata at most 16 KiB as JSON (UTF-8 bytes) on create and update; larger rows kept', async (t) => {
  const s = stack();
  const { developer } = await users();
  const fence = { name: 'Sized', latitude: 1, longitude: 1, radius_km: 1 };
  // {"k":"…"} is 8 bytes around the text: 16,376 one-byte characters fill 16 KiB exactly.
  const largest = { k: 'x'.repeat(16 * 1024 - 8) };
  const tooLarge = [
    { k: 'x'.repeat(16 * 1024 - 7) },
    // Bytes, not characters: 8,189 two-byte characters are 16,386 bytes of JSON.
    { k: '\u00e9'.repeat(8189) },
  ];
  for (const metadata of tooLarge) {
    const r = await s.request('POST', '/v1/geofences', { token: developer.token, body: { ...fence, metadata } });
    t.is(r.status, 400);
    t.regex(r.body.message, /^metadata: must be at most 16 KiB as JSON/);
  }
  const g = await make(s, developer.token, '/v1/geofences', { ...fence, metadata: largest });
  t.deepEqual(
    (await s.request('GET', `/v1/geofences/${g.id}`, { token: developer.token })).body.data.metadata,
    largest,
  );
  for (const metadata of tooLarge) {
    const r = await s.request('PATCH', `/v1/geofences/${g.id}`, { token: developer.token, body: { metadata } });
    t.is(r.status, 400);
    t.regex(r.body.message, /^metadata: must be at most 16 KiB as JSON/);
  }
  t.deepEqual(
    (await s.request('GET', `/v1/geofences/${g.id}`, { token: developer.token })).body.data.metadata,
    largest,
  );
  // A fence stored before the limit with larger metadata is not refused for it: other fields still change.
  await s
    .db('geofences')
    .where('id', g.id)
    .update({ metadata: JSON.stringify(tooLarge[0]) });
  const p = await s.request('PATCH', `/v1/geofences/${g.id}`, { token: developer.token, body: { name: 'Renamed' } });
  t.is(p.status, 200, p.text);
  t.like(p.body.data, { name: 'Renamed', metadata: tooLarge[0] });
});

test('trip categories: bare array by sort_order then name, hierarchy with existing parents and no cycles', async (t) => {
  const s = stack();
  const { developer, reader, admin } = await users();
  const root = await make(s, developer.token, '/v1/trip-categories', {
    name: 'Transport',
    color: '#1a2B3c',
    sort_order: 1,
  });
  t.like(root, { parent_id: null, is_active: true, sort_order: 1, color: '#1a2B3c' });
  const child = await make(s, developer.token, '/v1/trip-categories', { name: 'Bulk', parent_id: root.id });
  const grandchild = await make(s, developer.token, '/v1/trip-categories', {
    name: 'Grain',
    parent_id: child.id,
    sort_order: 1,
  });
  const first = await make(s, developer.token, '/v1/trip-categories', { name: 'zulu', sort_order: -5 });
  t.is(child.sort_order, 0);
  const list = await s.request('GET', '/v1/trip-categories', { token: reader.token });
  t.is(list.status, 200);
  t.true(Array.isArray(list.body));
  // Other tests of this file add categories concurrently: look at ours only.
  const ours = new Set([root.id, child.id, grandchild.id, first.id]);
  t.deepEqual(
    list.body.filter((c: { id: string }) => ours.has(c.id)).map((c: { name: string }) => c.name),
    ['zulu', 'Bulk', 'Grain', 'Transport'],
  );
  const keys = list.body.map((c: { sort_order: number; name: string }) => [c.sort_order, c.name.toLowerCase()]);
  t.deepEqual(
    keys,
    [...keys].sort(
      (x: [number, string], y: [number, string]) => x[0] - y[0] || (x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0),
    ),
  );

  const missing = await s.request('POST', '/v1/trip-categories', {
    token: developer.token,
    body: { name: 'x', parent_id: MISSING },
  });
  t.is(missing.status, 400);
  t.regex(missing.body.message, /^parent_id: no such trip category/);
  for (const parent of [root.id, child.id, grandchild.id]) {
    const cyc = await s.request('PATCH', `/v1/trip-categories/${root.id}`, {
      token: developer.token,
      body: { parent_id: parent },
    });
    t.is(cyc.status, 400, parent);
    t.regex(cyc.body.message, /^parent_id: /);
  }
  const moved = await s.request('PATCH', `/v1/trip-categories/${grandchild.id}`, {
    token: developer.token,
    body: { parent_id: root.id },
  });
  t.is(moved.body.data.parent_id, root.id);
  const toTop = await s.request('PATCH', `/v1/trip-categories/${child.id}`, {
    token: developer.token,
    body: { parent_id: null },
  });
  t.is(toTop.body.data.parent_id, null);
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{}, /^name: Required/],
    [{ name: 'x', color: 'red' }, /^color: must be a hex colour/],
    [{ name: 'x', sort_order: 1.5 }, /^sort_order: must be an integer/],
    [{ name: 'x', parent_id: 'root' }, /^parent_id: must be a UUID/],
  ];
  for (const [body, re] of cases) {
    const res = await s.request('POST', '/v1/trip-categories', { token: developer.token, body });
    t.is(res.status, 400);
    t.regex(res.body.message, re);
  }
  t.is((await s.request('PATCH', `/v1/trip-categories/${root.id}`, { token: developer.token, body: {} })).status, 400);
  t.like(
    (
      await s.request('PATCH', `/v1/trip-categories/${root.id}`, {
        token: developer.token,
        body: { is_active: false, description: 'd' },
      })
    ).body.data,
    { is_active: false, description: 'd', name: 'Transport' },
  );
  t.is((await s.request('GET', `/v1/trip-categories/${MISSING}`, { token: reader.token })).status, 404);
  t.is(
    (await s.request('PATCH', `/v1/trip-categories/${MISSING}`, { token: developer.token, body: { name: 'x' } }))
      .status,
    404,
  );
  t.is((await s.request('POST', '/v1/trip-categories', { token: reader.token, body: { name: 'x' } })).status, 403);
  t.is((await s.request('GET', '/v1/trip-categories')).status, 401);
  t.is((await s.request('DELETE', `/v1/trip-categories/${root.id}`, { token: developer.token })).status, 403);
  // Deleting a parent lifts its children to the top level.
  t.is((await s.request('DELETE', `/v1/trip-categories/${root.id}`, { token: admin.token })).status, 204);
  t.is(
    (await s.request('GET', `/v1/trip-categories/${grandchild.id}`, { token: reader.token })).body.data.parent_id,
    null,
  );
  t.is((await s.request('DELETE', `/v1/trip-categories/${root.id}`, { token: admin.token })).status, 404);
});

test('concurrent category moves cannot build a cycle', async (t) => {
  const s = stack();
  const { developer } = await users();
  const a = await make(s, developer.token, '/v1/trip-categories', { name: 'A' });
  const b = await make(s, developer.token, '/v1/trip-categories', { name: 'B' });
  const results = await Promise.all([
    s.request('PATCH', `/v1/trip-categories/${a.id}`, { token: developer.token, body: { parent_id: b.id } }),
    s.request('PATCH', `/v1/trip-categories/${b.id}`, { token: developer.token, body: { parent_id: a.id } }),
  ]);
  t.deepEqual(results.map((r) => r.status).sort(), [200, 400]);
});

test('trip templates: CRUD as a bare array by name, references checked, create-trip copies values', async (t) => {
  const s = stack();
  const { developer, reader, admin } = await users();
  const origin = await make(s, developer.token, '/v1/locations', { name: 'Origin' });
  const dest = await make(s, developer.token, '/v1/locations', { name: 'Destination' });
  const cat = await make(s, developer.token, '/v1/trip-categories', { name: 'Template cat' });
  const device = await make(s, developer.token, '/v1/devices', { name: 'Template device' });
  const r = await s.request('POST', '/v1/trip-templates', {
    token: developer.token,
    body: {
      name: 'Weekly run',
      description: 'every Monday',
      category_id: cat.id,
      origin_id: origin.id,
      destination_id: dest.id,
      device_id: device.id,
      gps_logging_enabled: true,
      default_weight_kg: 500,
      notes: 'fragile',
      tags: ['weekly'],
    },
  });
  t.is(r.status, 201, r.text);
  const tpl = r.body.data;
  t.deepEqual(Object.keys(tpl).sort(), [
    'category_id',
    'created_at',
    'default_weight_kg',
    'description',
    'destination_id',
    'device_id',
    'gps_logging_enabled',
    'id',
    'name',
    'notes',
    'origin_id',
    'tags',
    'updated_at',
  ]);
  const minimal = await make(s, developer.token, '/v1/trip-templates', { name: 'another' });
  t.like(minimal, { gps_logging_enabled: false, tags: [], default_weight_kg: null });
  const list = await s.request('GET', '/v1/trip-templates', { token: reader.token });
  t.true(Array.isArray(list.body));
  t.deepEqual(
    list.body.map((x: { name: string }) => x.name),
    ['another', 'Weekly run'],
  );
  t.is(list.body[1].id, tpl.id);

  const trip = await s.request('POST', `/v1/trip-templates/${tpl.id}/create-trip`, {
    token: developer.token,
    body: { weight_kg: 750 },
  });
  t.is(trip.status, 201, trip.text);
  t.like(trip.body.data, {
    name: 'Weekly run (from template)',
    status: 'draft',
    description: 'every Monday',
    category_id: cat.id,
    origin_id: origin.id,
    destination_id: dest.id,
    device_id: device.id,
    gps_logging_enabled: true,
    weight_kg: 750,
    notes: 'fragile',
    tags: ['weekly'],
  });
  t.is(trip.body._links.self, `/v1/trips/${trip.body.data.id}`);
  const noWeight = await s.request('POST', `/v1/trip-templates/${tpl.id}/create-trip`, {
    token: developer.token,
    body: {},
  });
  t.is(noWeight.status, 400);
  t.regex(noWeight.body.message, /^weight_kg: Required/);
  t.regex(
    (
      await s.request('POST', `/v1/trip-templates/${tpl.id}/create-trip`, {
        token: developer.token,
        body: { weight_kg: 'x' },
      })
    ).body.message,
    /^weight_kg: /,
  );
  t.is(
    (
      await s.request('POST', `/v1/trip-templates/${MISSING}/create-trip`, {
        token: developer.token,
        body: { weight_kg: 1 },
      })
    ).status,
    404,
  );
  t.is(
    (
      await s.request('POST', `/v1/trip-templates/${tpl.id}/create-trip`, {
        token: reader.token,
        body: { weight_kg: 1 },
      })
    ).status,
    403,
  );

  for (const field of ['category_id', 'origin_id', 'destination_id', 'device_id']) {
    const c = await s.request('POST', '/v1/trip-templates', {
      token: developer.token,
      body: { name: 'bad', [field]: MISSING },
    });
    t.is(c.status, 400);
    t.regex(c.body.message, new RegExp(`^${field}: no such`));
    const p = await s.request('PATCH', `/v1/trip-templates/${tpl.id}`, {
      token: developer.token,
      body: { [field]: MISSING },
    });
    t.is(p.status, 400);
    t.regex(p.body.message, new RegExp(`^${field}: no such`));
  }
  const patched = await s.request('PATCH', `/v1/trip-templates/${tpl.id}`, {
    token: developer.token,
    body: { notes: null, device_id: null },
  });
  t.like(patched.body.data, { notes: null, device_id: null, name: 'Weekly run', origin_id: origin.id });
  // "Same fields, all optional": an empty PATCH changes nothing.
  const noop = await s.request('PATCH', `/v1/trip-templates/${tpl.id}`, { token: developer.token, body: {} });
  t.is(noop.status, 200);
  t.is(noop.body.data.updated_at, patched.body.data.updated_at);
  t.is(
    (await s.request('POST', '/v1/trip-templates', { token: developer.token, body: { name: 'x'.repeat(201) } })).status,
    400,
  );
  t.is((await s.request('POST', '/v1/trip-templates', { token: reader.token, body: { name: 'x' } })).status, 403);
  t.is((await s.request('GET', `/v1/trip-templates/${MISSING}`, { token: reader.token })).status, 404);
  t.is((await s.request('DELETE', `/v1/trip-templates/${tpl.id}`, { token: developer.token })).status, 403);
  t.is((await s.request('DELETE', `/v1/trip-templates/${tpl.id}`, { token: admin.token })).status, 204);
  t.is((await s.request('DELETE', `/v1/trip-templates/${tpl.id}`, { token: admin.token })).status, 404);
  // The trip made from it stays.
  t.is((await s.request('GET', `/v1/trips/${trip.body.data.id}`, { token: reader.token })).status, 200);
});

// Serial, and cleaned up: another test compares the whole (bare) template list.
test.serial(
  'create-trip from a template whose category was deleted after the template was read: made from the template as it is now',
  async (t) => {
    const s = stack();
    const { developer, admin } = await users();
    const cat = await make(s, developer.token, '/v1/trip-categories', { name: `Doomed cat ${Date.now()}` });
    const created = await make(s, developer.token, '/v1/trip-templates', {
      name: 'Racing template',
      category_id: cat.id,
    });
    const { TripTemplate } = await import('../../shared/models/TripTemplate');
    const { createTripFromTemplate } = await import('../../shared/commands/trips');
    // The template as the route read it, then the category deleted (the template's reference is cleared).
    const stale = await TripTemplate.query(s.db).findById(created.id);
    const del = await s.request('DELETE', `/v1/trip-categories/${cat.id}`, { token: admin.token });
    t.is(del.status, 204, del.text);
    t.is((await s.db('trip_templates').where('id', created.id).first()).category_id, null);
    const trip = await createTripFromTemplate(s.db, stale!, 1200);
    t.is(trip.category_id, null);
    t.is(trip.name, 'Racing template (from template)');
    await s.db('trips').where('id', trip.id).delete();
    await s.db('trip_templates').where('id', created.id).delete();
  },
);

test('name limits count characters as the database does: 255 emoji fit, 256 are a 400 naming the field', async (t) => {
  const s = stack();
  const { developer } = await users();
  const ship = '\u{1F6A2}';
  const fits = await s.request('POST', '/v1/devices', { token: developer.token, body: { name: ship.repeat(255) } });
  t.is(fits.status, 201, fits.text);
  t.is(fits.body.data.name, ship.repeat(255));
  const over = await s.request('POST', '/v1/devices', { token: developer.token, body: { name: ship.repeat(256) } });
  t.is(over.status, 400);
  t.is(over.body.message, 'name: must be at most 255 characters');
  const latin = await s.request('POST', '/v1/devices', { token: developer.token, body: { name: 'x'.repeat(256) } });
  t.is(latin.status, 400);
  t.is(latin.body.message, 'name: must be at most 255 characters');
});
