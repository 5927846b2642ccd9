import test from 'ava';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { haversineKm } from '../../shared/geo';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { explainJson, vacuumSettled } from '../helpers/statements';
import { gpsBody, make, once, setStatus } from '../helpers/tracking';

const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' } });
const users = once(async () => {
  const s = stack();
  const [admin, developer, reader] = await Promise.all([
    createUser(s.db, { roles: ['role_admin'] }),
    createUser(s.db, { roles: ['role_developer'] }),
    createUser(s.db, { roles: ['role_api_read_only'] }),
  ]);
  return { admin, developer, reader };
});

const STATUSES = ['draft', 'active', 'paused', 'completed'] as const;
const ALLOWED = new Set(['draft>active', 'active>paused', 'paused>active', 'active>completed', 'paused>completed']);
/** How to bring a fresh draft trip into each status. */
const PATH: Record<string, string[]> = {
  draft: [],
  active: ['active'],
  paused: ['active', 'paused'],
  completed: ['active', 'completed'],
};

test('new trips are draft with the spec §2 fields; POST ignores a status in the body', async (t) => {
  const s = stack();
  const { developer } = await users();
  const r = await s.request('POST', '/v1/trips', {
    token: developer.token,
    body: { name: 'Rhine run', status: 'active', weight_kg: 1200.5, tags: ['cargo', 'cargo', 'river'], notes: 'n' },
  });
  t.is(r.status, 201, r.text);
  const trip = r.body.data;
  t.is(trip.status, 'draft');
  t.is(trip.gps_logging_enabled, false);
  t.is(trip.weight_kg, 1200.5);
  t.deepEqual(trip.tags, ['cargo', 'river']);
  t.is(trip.started_at, null);
  t.is(trip.ended_at, null);
  t.is(r.body._links.self, `/v1/trips/${trip.id}`);
  for (const k of [
    'device_id',
    'category_id',
    'origin_id',
    'destination_id',
    'start_latitude',
    'start_longitude',
    'end_latitude',
    'end_longitude',
    'description',
  ])
    t.is(trip[k], null, k);
});

for (const from of STATUSES) {
  for (const to of STATUSES) {
    const allowed = ALLOWED.has(`${from}>${to}`);
    test(`transition ${from} → ${to} is ${allowed ? 'allowed' : 'refused with 400'}`, async (t) => {
      const s = stack();
      const { developer } = await users();
      const trip = await make(s, developer.token, '/v1/trips', { name: `${from}-${to}` });
      for (const step of PATH[from]) t.is((await setStatus(s, developer.token, trip.id, step)).status, 200);
      const before = (await s.request('GET', `/v1/trips/${trip.id}`, { token: developer.token })).body.data;
      const historyBefore = (await s.request('GET', `/v1/trips/${trip.id}/history`, { token: developer.token })).body
        .length;
      const r = await setStatus(s, developer.token, trip.id, to);
      const history = (await s.request('GET', `/v1/trips/${trip.id}/history`, { token: developer.token })).body;
      if (!allowed) {
        t.is(r.status, 400, r.text);
        t.is(r.body.error, 'BadRequest');
        t.regex(r.body.message, new RegExp(`^status: invalid transition from ${from} to ${to}`));
        t.is(history.length, historyBefore);
        const after = (await s.request('GET', `/v1/trips/${trip.id}`, { token: developer.token })).body.data;
        t.is(after.status, from);
        return;
      }
      t.is(r.status, 200, r.text);
      const after = r.body.data;
      t.is(after.status, to);
      if (from === 'draft') t.truthy(after.started_at);
      else t.is(after.started_at, before.started_at, 'started_at is set only when a draft starts');
      if (to === 'completed') t.truthy(after.ended_at);
      else t.is(after.ended_at, null);
      t.is(history.length, historyBefore + 1);
      const last = history[history.length - 1];
      t.like(last, { trip_id: trip.id, old_status: from, new_status: to, changed_by: developer.id });
    });
  }
}

test('history: one entry per change, ascending, with position from the body or the start/end coordinates; 404 for a missing trip', async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const trip = await make(s, developer.token, '/v1/trips', { name: 'history' });
  t.is(
    (await setStatus(s, developer.token, trip.id, 'active', { start_latitude: 50.1, start_longitude: 8.6 })).status,
    200,
  );
  t.is((await setStatus(s, developer.token, trip.id, 'paused', { latitude: 50.2, longitude: 8.7 })).status, 200);
  t.is((await setStatus(s, developer.token, trip.id, 'active')).status, 200);
  const done = await setStatus(s, developer.token, trip.id, 'completed', { end_latitude: 51, end_longitude: 9 });
  t.is(done.body.data.end_latitude, 51);
  t.is(done.body.data.start_latitude, 50.1);
  const h = await s.request('GET', `/v1/trips/${trip.id}/history`, { token: reader.token });
  t.is(h.status, 200);
  t.true(Array.isArray(h.body));
  t.deepEqual(
    h.body.map((e: { old_status: string; new_status: string; latitude: number | null; longitude: number | null }) => [
      e.old_status,
      e.new_status,
      e.latitude,
      e.longitude,
    ]),
    [
      ['draft', 'active', 50.1, 8.6],
      ['active', 'paused', 50.2, 8.7],
      ['paused', 'active', null, null],
      ['active', 'completed', 51, 9],
    ],
  );
  const times = h.body.map((e: { changed_at: string }) => Date.parse(e.changed_at));
  t.deepEqual(
    times,
    [...times].sort((a, b) => a - b),
  );
  // One instant per change: the trip's started_at and ended_at are their entries' changed_at, and
  // the last change's updated_at is its entry's too (not the api host's clock a little before).
  t.is(done.body.data.started_at, h.body[0].changed_at);
  t.is(done.body.data.ended_at, h.body[3].changed_at);
  t.is(done.body.data.updated_at, h.body[3].changed_at);
  // Stored to the microsecond, as the database clock gives it (history is sorted by changed_at):
  // the trip's instants equal their entries' exactly, and not all four fall on a whole millisecond.
  const stored = await s.db.raw(
    `SELECT t.started_at = (SELECT min(changed_at) FROM trip_status_history WHERE trip_id = t.id) AS started,
            t.ended_at = (SELECT max(changed_at) FROM trip_status_history WHERE trip_id = t.id) AS ended,
            t.updated_at = t.ended_at AS updated,
            (SELECT bool_or(extract(microseconds FROM changed_at)::int % 1000 <> 0)
               FROM trip_status_history WHERE trip_id = t.id) AS micro
       FROM trips t WHERE t.id = ?`,
    [trip.id],
  );
  t.deepEqual(stored.rows[0], { started: true, ended: true, updated: true, micro: true });
  t.deepEqual(Object.keys(h.body[0]).sort(), [
    'changed_at',
    'changed_by',
    'id',
    'latitude',
    'longitude',
    'new_status',
    'old_status',
    'trip_id',
  ]);
  t.is(
    (await s.request('GET', '/v1/trips/00000000-0000-4000-8000-000000000000/history', { token: reader.token })).status,
    404,
  );
  // Edits without a status change add no entry.
  await s.request('PATCH', `/v1/trips/${trip.id}`, { token: developer.token, body: { notes: 'after the fact' } });
  t.is((await s.request('GET', `/v1/trips/${trip.id}/history`, { token: reader.token })).body.length, 4);
});

test('a status change by an API key records its owner; the system key is not allowed on /v1/trips', async (t) => {
  const s = stack();
  const { developer } = await users();
  const { createKey } = await import('../helpers/factories');
  const key = await createKey({ userId: developer.id, scopes: ['trips:read', 'trips:write'] });
  const trip = await make(s, key.key, '/v1/trips', { name: 'by key' });
  t.is((await setStatus(s, key.key, trip.id, 'active')).status, 200);
  const h = (await s.request('GET', `/v1/trips/${trip.id}/history`, { token: key.key })).body;
  t.is(h[0].changed_by, developer.id);
  t.is((await s.request('GET', '/v1/trips', { token: s.systemKey })).status, 403);
});

test('PATCH changes only the provided fields; unknown references are 400 naming the field', async (t) => {
  const s = stack();
  const { developer, admin } = await users();
  const loc = await make(s, admin.token, '/v1/locations', { name: 'Port' });
  const cat = await make(s, admin.token, '/v1/trip-categories', { name: 'Cargo' });
  const dev = await make(s, admin.token, '/v1/devices', { name: 'Tracker' });
  const trip = await make(s, developer.token, '/v1/trips', {
    name: 'patch me',
    description: 'keep',
    origin_id: loc.id,
    category_id: cat.id,
    device_id: dev.id,
    tags: ['a'],
  });
  t.is(trip.origin_id, loc.id);
  const r = await s.request('PATCH', `/v1/trips/${trip.id}`, {
    token: developer.token,
    body: { name: 'renamed', weight_kg: 7 },
  });
  t.is(r.status, 200);
  t.like(r.body.data, {
    name: 'renamed',
    weight_kg: 7,
    description: 'keep',
    origin_id: loc.id,
    category_id: cat.id,
    device_id: dev.id,
    tags: ['a'],
    status: 'draft',
  });
  const cleared = await s.request('PATCH', `/v1/trips/${trip.id}`, {
    token: developer.token,
    body: { origin_id: null, description: null },
  });
  t.like(cleared.body.data, { origin_id: null, description: null, category_id: cat.id });
  const missing = '00000000-0000-4000-8000-000000000000';
  for (const field of ['category_id', 'origin_id', 'destination_id', 'device_id']) {
    const c = await s.request('POST', '/v1/trips', { token: developer.token, body: { name: 'x', [field]: missing } });
    t.is(c.status, 400, field);
    t.regex(c.body.message, new RegExp(`^${field}: no such`));
    const p = await s.request('PATCH', `/v1/trips/${trip.id}`, { token: developer.token, body: { [field]: missing } });
    t.is(p.status, 400, field);
    t.regex(p.body.message, new RegExp(`^${field}: no such`));
    const bad = await s.request('PATCH', `/v1/trips/${trip.id}`, { token: developer.token, body: { [field]: 'nope' } });
    t.regex(bad.body.message, new RegExp(`^${field}: must be a UUID`));
  }
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{}, /^name: Required/],
    [{ name: '' }, /^name: must not be empty/],
    [{ name: 'x', weight_kg: -1 }, /^weight_kg: must be >= 0/],
    [{ name: 'x', weight_kg: 'heavy' }, /^weight_kg: must be a number/],
    [{ name: 'x', tags: 'a,b' }, /^tags: /],
    [{ name: 'x', gps_logging_enabled: 'yes' }, /^gps_logging_enabled: /],
  ];
  for (const [body, re] of cases) {
    const c = await s.request('POST', '/v1/trips', { token: developer.token, body });
    t.is(c.status, 400, JSON.stringify(body));
    t.regex(c.body.message, re);
  }
  t.regex(
    (await s.request('PATCH', `/v1/trips/${trip.id}`, { token: developer.token, body: { status: 'flying' } })).body
      .message,
    /^status: must be one of/,
  );
  t.regex(
    (await s.request('PATCH', `/v1/trips/${trip.id}`, { token: developer.token, body: { start_latitude: 100 } })).body
      .message,
    /^start_latitude: /,
  );
  t.is((await s.request('PATCH', `/v1/trips/${missing}`, { token: developer.token, body: { name: 'x' } })).status, 404);
  t.is((await s.request('GET', `/v1/trips/${missing}`, { token: developer.token })).status, 404);
});

test('permissions: trips:read lists, trips:write creates, trips:delete deletes', async (t) => {
  const s = stack();
  const { developer, reader, admin } = await users();
  t.is((await s.request('GET', '/v1/trips', { token: reader.token })).status, 200);
  t.is((await s.request('POST', '/v1/trips', { token: reader.token, body: { name: 'x' } })).status, 403);
  const trip = await make(s, developer.token, '/v1/trips', { name: 'del' });
  t.is((await s.request('PATCH', `/v1/trips/${trip.id}`, { token: reader.token, body: { name: 'y' } })).status, 403);
  t.is((await s.request('DELETE', `/v1/trips/${trip.id}`, { token: developer.token })).status, 403);
  t.is((await s.request('DELETE', `/v1/trips/${trip.id}`, { token: admin.token })).status, 204);
  t.is((await s.request('GET', '/v1/trips')).status, 401);
});

test('delete: draft and completed only (409 while active or paused); a completed trip leaves its points without trip', async (t) => {
  const s = stack();
  const { developer, admin } = await users();
  const draft = await make(s, developer.token, '/v1/trips', { name: 'draft' });
  t.is((await s.request('DELETE', `/v1/trips/${draft.id}`, { token: admin.token })).status, 204);
  t.is((await s.request('GET', `/v1/trips/${draft.id}`, { token: admin.token })).status, 404);
  t.is((await s.request('DELETE', `/v1/trips/${draft.id}`, { token: admin.token })).status, 404);

  const trip = await make(s, developer.token, '/v1/trips', { name: 'lifecycle' });
  await setStatus(s, developer.token, trip.id, 'active');
  const point = await make(s, developer.token, '/v1/gps', gpsBody({ trip_id: trip.id }));
  const activeDel = await s.request('DELETE', `/v1/trips/${trip.id}`, { token: admin.token });
  t.is(activeDel.status, 409);
  t.regex(activeDel.body.message, /active/);
  await setStatus(s, developer.token, trip.id, 'paused');
  t.is((await s.request('DELETE', `/v1/trips/${trip.id}`, { token: admin.token })).status, 409);
  await setStatus(s, developer.token, trip.id, 'completed');
  t.is((await s.request('DELETE', `/v1/trips/${trip.id}`, { token: admin.token })).status, 204);
  const after = await s.request('GET', `/v1/gps/${point.id}`, { token: admin.token });
  t.is(after.status, 200);
  t.is(after.body.data.trip_id, null);
  // Unlinked now, so the point can be deleted.
  t.is((await s.request('DELETE', `/v1/gps/${point.id}`, { token: admin.token })).status, 204);
});

test('list: newest first, default limit 20, max 100, status filter', async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const made: Array<{ id: string }> = [];
  for (let i = 0; i < 23; i++) made.push(await make(s, developer.token, '/v1/trips', { name: `list ${i}` }));
  await setStatus(s, developer.token, made[0].id, 'active');
  await setStatus(s, developer.token, made[1].id, 'active');
  await setStatus(s, developer.token, made[1].id, 'paused');
  const page = await s.request('GET', '/v1/trips', { token: reader.token });
  t.is(page.status, 200);
  t.is(page.body.pagination.limit, 20);
  t.is(page.body.data.length, 20);
  t.true(page.body.pagination.total >= 23);
  const created = page.body.data.map((x: { created_at: string }) => Date.parse(x.created_at));
  t.deepEqual(
    created,
    [...created].sort((a, b) => b - a),
  );
  const active = await s.request('GET', '/v1/trips?status=active&limit=100', { token: reader.token });
  t.true(active.body.data.every((x: { status: string }) => x.status === 'active'));
  t.true(active.body.data.some((x: { id: string }) => x.id === made[0].id));
  t.regex(active.body._links.self, /status=active/);
  const paused = await s.request('GET', '/v1/trips?status=paused&limit=100', { token: reader.token });
  t.deepEqual(paused.body.data.map((x: { id: string }) => x.id).includes(made[1].id), true);
  const bad = await s.request('GET', '/v1/trips?status=flying', { token: reader.token });
  t.is(bad.status, 400);
  t.regex(bad.body.message, /^status: /);
  t.is((await s.request('GET', '/v1/trips?limit=101', { token: reader.token })).status, 400);
  t.is((await s.request('GET', '/v1/trips?limit=abc', { token: reader.token })).status, 400);
});

test('trip GPS: ascending by timestamp, default limit 10; distance_km and duration_seconds on the single GET; GPX 1.1 export', async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const trip = await make(s, developer.token, '/v1/trips', {
    name: 'Track & <test>',
    description: 'with points',
    tags: ['gpx'],
  });
  const empty = await s.request('GET', `/v1/trips/${trip.id}`, { token: reader.token });
  t.is(empty.body.data.distance_km, 0);
  t.is(empty.body.data.duration_seconds, 0);
  const t0 = 1_700_000_000;
  const coords = Array.from({ length: 12 }, (_, i) => [52 + i * 0.01, 13 + i * 0.005] as const);
  // Posted out of order: the listing sorts by timestamp.
  const order = [5, 0, 11, 3, 1, 2, 4, 6, 8, 7, 10, 9];
  const batch = await s.request('POST', '/v1/gps/batch', {
    token: developer.token,
    body: {
      points: order.map((i) =>
        gpsBody({
          trip_id: trip.id,
          latitude: coords[i][0],
          longitude: coords[i][1],
          timestamp: t0 + i * 30,
          hdop: 0.8,
        }),
      ),
    },
  });
  t.is(batch.status, 201, batch.text);
  const page1 = await s.request('GET', `/v1/trips/${trip.id}/gps`, { token: reader.token });
  t.is(page1.status, 200);
  t.is(page1.body.pagination.limit, 10);
  t.is(page1.body.pagination.total, 12);
  t.is(page1.body.data.length, 10);
  t.deepEqual(
    page1.body.data.map((p: { timestamp: string }) => p.timestamp),
    Array.from({ length: 10 }, (_, i) => new Date((t0 + i * 30) * 1000).toISOString()),
  );
  t.is(page1.body.data[0].hdop, 0.8);
  // Each item is exactly a GPS point, the same as GET /v1/gps/{id} answers it (nothing of the page's statement).
  const asPoint = await s.request('GET', `/v1/gps/${page1.body.data[0].id}`, { token: reader.token });
  t.is(asPoint.status, 200, asPoint.text);
  t.deepEqual(page1.body.data[0], asPoint.body.data);
  t.is((await s.request('GET', `/v1/trips/${trip.id}/gps?page=2`, { token: reader.token })).body.data.length, 2);
  t.is((await s.request('GET', `/v1/trips/${trip.id}/gps?limit=101`, { token: reader.token })).status, 400);
  t.is(
    (await s.request('GET', '/v1/trips/00000000-0000-4000-8000-000000000000/gps', { token: reader.token })).status,
    404,
  );

  let expected = 0;
  for (let i = 1; i < coords.length; i++)
    expected += haversineKm(coords[i - 1][0], coords[i - 1][1], coords[i][0], coords[i][1]);
  const single = await s.request('GET', `/v1/trips/${trip.id}`, { token: reader.token });
  t.true(Math.abs(single.body.data.distance_km - expected) < 0.002, `${single.body.data.distance_km} vs ${expected}`);
  t.is(single.body.data.duration_seconds, 11 * 30);
  const list = await s.request('GET', '/v1/trips?limit=100', { token: reader.token });
  t.false('distance_km' in list.body.data[0]);

  const gpx = await s.request('GET', `/v1/trips/${trip.id}/gpx`, { token: reader.token });
  t.is(gpx.status, 200);
  t.regex(gpx.headers.get('content-type') ?? '', /^application\/gpx\+xml/);
  t.regex(gpx.headers.get('content-disposition') ?? '', /attachment; filename="trip-.*\.gpx"/);
  t.is(XMLValidator.validate(gpx.text), true);
  const doc = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '@_', parseAttributeValue: true }).parse(
    gpx.text,
  );
  t.is(doc.gpx['@_version'], 1.1);
  t.is(doc.gpx['@_xmlns'], 'http://www.topografix.com/GPX/1/1');
  t.is(doc.gpx.metadata.name, 'Track & <test>');
  t.is(doc.gpx.metadata.keywords, 'gpx');
  t.true(Math.abs(doc.gpx.metadata.extensions['trip:distance_km'] - expected) < 0.002);
  t.is(doc.gpx.metadata.extensions['trip:duration_seconds'], 330);
  t.deepEqual(doc.gpx.metadata.bounds, {
    '@_minlat': 52,
    '@_minlon': 13,
    '@_maxlat': coords[11][0],
    '@_maxlon': coords[11][1],
  });
  const pts = doc.gpx.trk.trkseg.trkpt;
  t.is(pts.length, 12);
  t.is(pts[0]['@_lat'], 52);
  t.is(pts[0].time, new Date(t0 * 1000).toISOString());
  t.is(pts[11].time, new Date((t0 + 330) * 1000).toISOString());
  t.is(pts[0].ele, 34);
  t.is(pts[0].hdop, 0.8);
  t.is(pts[0].extensions['gpxtpx:TrackPointExtension']['gpxtpx:speed'], 10);
  t.is(pts[0].extensions['gpxtpx:TrackPointExtension']['gpxtpx:course'], 90);
  t.is(
    (await s.request('GET', '/v1/trips/00000000-0000-4000-8000-000000000000/gpx', { token: reader.token })).status,
    404,
  );
  t.is((await s.request('GET', `/v1/trips/${trip.id}/gpx`)).status, 401);
});

test('concurrent single GETs of different trips each get their own stats (stats are read in one batch)', async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const t0 = 1_700_100_000;
  // Trip k: k + 2 points 0.01° of latitude apart, one minute apart; trip 3 has none.
  const trips: Array<{ id: string }> = [];
  for (let k = 0; k < 4; k++) {
    const trip = await make(s, developer.token, '/v1/trips', { name: `stats ${k}` });
    if (k < 3) {
      const points = Array.from({ length: k + 2 }, (_, i) =>
        gpsBody({ trip_id: trip.id, latitude: 50 + i * 0.01, longitude: 8, timestamp: t0 + i * 60 }),
      );
      t.is((await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points } })).status, 201);
    }
    trips.push(trip);
  }
  const leg = haversineKm(50, 8, 50.01, 8);
  const answers = await Promise.all(
    [...trips, ...trips].map((trip) => s.request('GET', `/v1/trips/${trip.id}`, { token: reader.token })),
  );
  answers.forEach((a, i) => {
    const k = i % 4;
    t.is(a.status, 200);
    t.is(a.body.data.id, trips[k].id);
    t.is(a.body.data.duration_seconds, k < 3 ? (k + 1) * 60 : 0);
    t.true(Math.abs(a.body.data.distance_km - (k < 3 ? (k + 1) * leg : 0)) < 0.002, `trip ${k}`);
  });
});

test("a trip's stats are read from the track index alone (index-only scan in track order, no sort)", async (t) => {
  const s = stack();
  const { developer } = await users();
  const trip = await make(s, developer.token, '/v1/trips', { name: 'covered' });
  const batch = await s.request('POST', '/v1/gps/batch', {
    token: developer.token,
    body: { points: [0, 1, 2].map((i) => gpsBody({ trip_id: trip.id, timestamp: 1_700_000_000 + i })) },
  });
  t.is(batch.status, 201, batch.text);
  // The statement GET /v1/trips/{id} sends for the stats, as the query builder emits it.
  let stats: { sql: string; bindings: unknown[] } | undefined;
  const listen = (q: { sql: string; bindings: unknown[] }) => {
    if (/lag\(latitude\)/.test(q.sql)) stats = q;
  };
  s.api.services.db.on('query', listen);
  const r = await s.request('GET', `/v1/trips/${trip.id}`, { token: developer.token });
  s.api.services.db.off('query', listen);
  t.is(r.status, 200, r.text);
  t.truthy(stats, 'the stats statement ran');
  // A small table would be scanned whole; with scans that visit rows ruled out, the index must
  // still answer it by itself and in order (the rows vacuumed, as they are once settled).
  await vacuumSettled(s.db, 'gps_points');
  // On one connection of its own, as sent ($n parameters).
  const plan = await explainJson(s.db, stats!, {
    settings: ['SET enable_seqscan = off', 'SET enable_bitmapscan = off'],
  });
  // Every window over the track (the whole track, and the legs added after the stored last point)
  // reads the covering index in track order: no sort of points.
  type PlanNode = { 'Node Type': string; 'Index Name'?: string; Plans?: PlanNode[] };
  const windows: PlanNode[] = [];
  const walk = (n: PlanNode) => {
    if (n['Node Type'] === 'WindowAgg') windows.push(n);
    n.Plans?.forEach(walk);
  };
  (JSON.parse(plan) as Array<{ Plan: PlanNode }>).forEach((p) => walk(p.Plan));
  t.is(windows.length, 2);
  for (const w of windows)
    t.deepEqual(
      w.Plans?.map((c) => [c['Node Type'], c['Index Name']]),
      [['Index Only Scan', 'gps_points_trip_track']],
    );
});

test("a trip's stats are stored once computed, and recomputed after its points change", async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const trip = await make(s, developer.token, '/v1/trips', { name: 'stored stats' });
  const t0 = 1_700_200_000;
  const post = async (i: number) => {
    const r = await s.request('POST', '/v1/gps', {
      token: developer.token,
      body: gpsBody({ trip_id: trip.id, latitude: 48 + i * 0.01, longitude: 11, timestamp: t0 + i * 60 }),
    });
    t.is(r.status, 201, r.text);
    return r.body.data.id as string;
  };
  const stats = async () => {
    const r = await s.request('GET', `/v1/trips/${trip.id}`, { token: reader.token });
    t.is(r.status, 200, r.text);
    return [r.body.data.distance_km, r.body.data.duration_seconds];
  };
  const leg = haversineKm(48, 11, 48.01, 11);
  await post(0);
  await post(1);
  const first = await stats();
  t.true(Math.abs(first[0] - leg) < 0.002);
  t.is(first[1], 60);
  // Stored: a read takes the stored figures (planted here) while no point changed.
  const row = await s.db('trip_track_stats').where('trip_id', trip.id).first();
  t.is(row.stats_version, row.version);
  // (Not a base to add new legs to: appends_only off, so the next change recomputes the whole track.)
  await s
    .db('trip_track_stats')
    .where('trip_id', trip.id)
    .update({ distance_km: 999, duration_seconds: 5, appends_only: false });
  // The answer itself is cached while the trips and the track are unchanged (api/responseCache.ts):
  // a write to the trip's own row makes it be built again, and the build reads the planted figures.
  await s.db('trips').where('id', trip.id).update({ notes: 'touched' });
  t.deepEqual(await stats(), [999, 5]);
  // A new point (single POST, group commit) makes them stale: computed again from the track.
  await post(3);
  const third = await stats();
  t.true(Math.abs(third[0] - 3 * leg) < 0.002, String(third[0]));
  t.is(third[1], 180);
  // A point out of order, between two others, changes two legs: still right.
  const between = await post(2);
  t.true(Math.abs((await stats())[0] - 3 * leg) < 0.002);
  // A deleted point (as retention deletes them; the API keeps a trip's points): gone from the figures.
  t.is(await s.db('gps_points').where('id', between).delete(), 1);
  const afterDelete = await stats();
  t.true(Math.abs(afterDelete[0] - 3 * leg) < 0.002);
  t.is(afterDelete[1], 180);
  const last = await s.db('gps_points').where('trip_id', trip.id).orderBy('timestamp', 'desc').first();
  t.is(await s.db('gps_points').where('id', last.id).delete(), 1);
  t.deepEqual(await stats(), [Math.round(leg * 1000) / 1000, 60]);
});

test('a read does not wait for a writer that holds the trip, and sees its points once committed', async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const trip = await make(s, developer.token, '/v1/trips', { name: 'open writer' });
  const body = (i: number) =>
    gpsBody({ trip_id: trip.id, latitude: 47, longitude: 9 + i * 0.01, timestamp: 1_700_300_000 + i * 10 });
  t.is(
    (await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points: [0, 1].map(body) } })).status,
    201,
  );
  const leg = haversineKm(47, 9, 47, 9.01);
  const read = async () => (await s.request('GET', `/v1/trips/${trip.id}`, { token: reader.token })).body.data;
  // A writer inserts a third point and keeps its transaction open: the trip's row is locked by it.
  const tx = await s.db.transaction();
  try {
    await tx('gps_points').insert({
      trip_id: trip.id,
      latitude: 47,
      longitude: 9.02,
      timestamp: new Date(1_700_300_020_000),
      speed_kmh: 1,
      speed_mps: 1,
      speed_mph: 1,
      speed_knots: 1,
    });
    const during = await read();
    t.true(Math.abs(during.distance_km - leg) < 0.002, 'the committed track only');
    t.is(during.duration_seconds, 10);
    await tx.commit();
  } catch (err) {
    await tx.rollback();
    throw err;
  }
  const after = await read();
  t.true(Math.abs(after.distance_km - 2 * leg) < 0.002, String(after.distance_km));
  t.is(after.duration_seconds, 20);
});

test('deleting a trip deletes its stored stats; its points stay, without a trip', async (t) => {
  const s = stack();
  const { developer, reader, admin } = await users();
  const trip = await make(s, developer.token, '/v1/trips', { name: 'deleted with stats' });
  const points = [0, 1].map((i) =>
    gpsBody({ trip_id: trip.id, latitude: 46, longitude: 7 + i * 0.01, timestamp: 1_700_400_000 + i }),
  );
  t.is((await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points } })).status, 201);
  t.is((await s.request('GET', `/v1/trips/${trip.id}`, { token: reader.token })).status, 200);
  t.truthy(await s.db('trip_track_stats').where('trip_id', trip.id).first());
  t.is((await s.request('DELETE', `/v1/trips/${trip.id}`, { token: admin.token })).status, 204);
  t.falsy(await s.db('trip_track_stats').where('trip_id', trip.id).first());
  t.is((await s.request('GET', `/v1/trips/${trip.id}`, { token: reader.token })).status, 404);
});
