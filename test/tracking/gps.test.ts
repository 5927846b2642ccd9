import test from 'ava';
import { createUser } from '../helpers/factories';
import { startSecondApi } from '../helpers/secondApi';
import { useStack } from '../helpers/stack';
import { gpsBody, make, nowSeconds, once } from '../helpers/tracking';
import { lockWaiters } from '../helpers/wait';

const stack = useStack(test, { env: { RATE_LIMIT_GPS_POST: '10000', RATE_LIMIT_USER: '10000' } });

const users = once(async () => {
  const s = stack();
  const [admin, developer, reader] = await Promise.all([
    createUser(s.db, { roles: ['role_admin'] }),
    createUser(s.db, { roles: ['role_developer'] }),
    createUser(s.db, { roles: ['role_api_read_only'] }),
  ]);
  return { admin, developer, reader };
});

test('POST /v1/gps stores a point: Unix seconds in, ISO 8601 out, every field of spec §2', async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const ts = 1_700_000_000;
  const r = await s.request('POST', '/v1/gps', {
    token: developer.token,
    body: gpsBody({ timestamp: ts, device_id: 'boat-1', pdop: 1.2, hdop: 0.9, vdop: 1.1 }),
  });
  t.is(r.status, 201, r.text);
  const p = r.body.data;
  t.deepEqual(
    Object.keys(p).sort(),
    [
      'altitude',
      'created_at',
      'device_id',
      'hdop',
      'heading',
      'id',
      'latitude',
      'longitude',
      'pdop',
      'speed_kmh',
      'speed_knots',
      'speed_mph',
      'speed_mps',
      'timestamp',
      'trip_id',
      'vdop',
    ].sort(),
  );
  t.is(p.timestamp, new Date(ts * 1000).toISOString());
  t.is(p.device_id, 'boat-1');
  t.is(p.trip_id, null);
  t.is(p.latitude, 52.52);
  t.is(p.pdop, 1.2);
  t.is(r.body._links.self, `/v1/gps/${p.id}`);
  const got = await s.request('GET', `/v1/gps/${p.id}`, { token: reader.token });
  t.is(got.status, 200);
  t.deepEqual(got.body.data, p);
});

test('device identifiers are stored verbatim, whatever characters they hold', async (t) => {
  const s = stack();
  const { developer } = await users();
  const ids = ['NULL', 'a,"b"\\{c} d', "o'brien", 'ümlaut-🚢'];
  const r = await s.request('POST', '/v1/gps/batch', {
    token: developer.token,
    body: { points: ids.map((device_id) => gpsBody({ device_id })) },
  });
  t.is(r.status, 201, r.text);
  const rows = await s.db('gps_points').whereIn(
    'id',
    r.body.data.accepted.map((a: { id: string }) => a.id),
  );
  t.deepEqual(rows.map((x) => x.device_id).sort(), [...ids].sort());
  const single = await make(s, developer.token, '/v1/gps', gpsBody({ device_id: ids[1] }));
  t.is(single.device_id, ids[1]);
  t.is((await s.db('gps_points').where('id', single.id).first()).device_id, ids[1]);
});

test('POST /v1/gps rejects bad input with a 400 naming the field', async (t) => {
  const s = stack();
  const { developer } = await users();
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [gpsBody({ latitude: 91 }), /^latitude: must be between -90 and 90/],
    [gpsBody({ latitude: -90.0001 }), /^latitude: /],
    [gpsBody({ longitude: 180.5 }), /^longitude: must be between -180 and 180/],
    [gpsBody({ longitude: 'east' }), /^longitude: must be a number/],
    [gpsBody({ timestamp: 1.5 }), /^timestamp: must be an integer/],
    [gpsBody({ timestamp: '2024-01-01T00:00:00Z' }), /^timestamp: must be an integer/],
    [gpsBody({ timestamp: Date.now() }), /^timestamp: must be Unix seconds, not milliseconds$/],
    // A tracker's clock a year ahead: the point would stay "current" and freeze geofence events.
    [gpsBody({ timestamp: nowSeconds() + 365 * 86400 }), /^timestamp: must not be more than 600 s ahead/],
    [gpsBody({ timestamp: nowSeconds() + 660 }), /^timestamp: must not be more than 600 s ahead/],
    [gpsBody({ speed_knots: undefined }), /^speed_knots: Required/],
    [gpsBody({ speed_mph: undefined }), /^speed_mph: Required/],
    [gpsBody({ speed_kmh: null }), /^speed_kmh: /],
    [gpsBody({ heading: 400 }), /^heading: /],
    [gpsBody({ trip_id: 'nope' }), /^trip_id: must be a UUID/],
    [gpsBody({ trip_id: '00000000-0000-4000-8000-000000000000' }), /^trip_id: no such trip/],
    [gpsBody({ latitude: undefined }), /^latitude: Required/],
  ];
  for (const [body, re] of cases) {
    const r = await s.request('POST', '/v1/gps', { token: developer.token, body });
    t.is(r.status, 400, JSON.stringify(body));
    t.is(r.body.error, 'BadRequest');
    t.regex(r.body.message, re);
  }
  // JSON cannot carry NaN/Infinity; a number literal too large for a double is rejected as non-finite.
  const inf = await s.request('POST', '/v1/gps', {
    token: developer.token,
    rawBody: JSON.stringify(gpsBody()).replace('"latitude":52.52', '"latitude":1e999'),
  });
  t.is(inf.status, 400);
  t.regex(inf.body.message, /^latitude: /);
});

test('permissions: gps:read for reads, gps:write to post, gps:delete to delete; anonymous is 401', async (t) => {
  const s = stack();
  const { admin, developer, reader } = await users();
  t.is((await s.request('GET', '/v1/gps')).status, 401);
  t.is((await s.request('POST', '/v1/gps', { token: reader.token, body: gpsBody() })).status, 403);
  const p = await make(s, developer.token, '/v1/gps', gpsBody());
  const denied = await s.request('DELETE', `/v1/gps/${p.id}`, { token: developer.token });
  t.is(denied.status, 403);
  t.regex(denied.body.message, /gps:delete/);
  t.is((await s.request('DELETE', `/v1/gps/${p.id}`, { token: admin.token })).status, 204);
  t.is((await s.request('GET', `/v1/gps/${p.id}`, { token: reader.token })).status, 404);
  t.is((await s.request('DELETE', `/v1/gps/${p.id}`, { token: admin.token })).status, 404);
  t.is((await s.request('GET', '/v1/gps/not-a-uuid', { token: reader.token })).status, 400);
});

test('DELETE of a point linked to a trip is 409', async (t) => {
  const s = stack();
  const { admin, developer } = await users();
  const trip = await make(s, admin.token, '/v1/trips', { name: 'linked' });
  const p = await make(s, developer.token, '/v1/gps', gpsBody({ trip_id: trip.id }));
  t.is(p.trip_id, trip.id);
  const r = await s.request('DELETE', `/v1/gps/${p.id}`, { token: admin.token });
  t.is(r.status, 409);
  t.is(r.body.error, 'Conflict');
});

test('GET /v1/gps paginates newest first: default limit 10, max 100', async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const device = `pager-${Date.now()}`;
  const base = nowSeconds() - 1000;
  const res = await s.request('POST', '/v1/gps/batch', {
    token: developer.token,
    body: { points: Array.from({ length: 25 }, (_, i) => gpsBody({ device_id: device, timestamp: base + i })) },
  });
  t.is(res.status, 201, res.text);
  const first = await s.request('GET', `/v1/gps?device_id=${device}`, { token: reader.token });
  t.is(first.status, 200);
  t.is(first.body.data.length, 10);
  t.deepEqual(first.body.pagination, { page: 1, limit: 10, total: 25, total_pages: 3 });
  t.is(first.body.data[0].timestamp, new Date((base + 24) * 1000).toISOString());
  t.truthy(first.body._links.next);
  t.falsy(first.body._links.prev);
  const last = await s.request('GET', `/v1/gps?device_id=${device}&page=3&limit=10`, { token: reader.token });
  t.is(last.body.data.length, 5);
  t.falsy(last.body._links.next);
  t.is((await s.request('GET', '/v1/gps?limit=101', { token: reader.token })).status, 400);
  t.is((await s.request('GET', '/v1/gps?limit=0', { token: reader.token })).status, 400);
  t.is((await s.request('GET', '/v1/gps?page=0', { token: reader.token })).status, 400);
  t.is((await s.request('GET', `/v1/gps?limit=100&device_id=${device}`, { token: reader.token })).body.data.length, 25);
});

// Serial: other tests of this file insert points too, and the global latest point is shared.
test.serial('current is the latest point and is never staler than the last insert', async (t) => {
  const s = stack();
  const { admin, developer, reader } = await users();
  const device = `fresh-${Date.now()}`;
  // Ahead of every other point of the file, within the 600 s a point may be ahead of the clock.
  const t0 = nowSeconds() + 500;
  // Warm the cache, then insert newer points: each answer must show the newest at once.
  await make(s, developer.token, '/v1/gps', gpsBody({ device_id: device, timestamp: t0 }));
  for (let i = 1; i <= 5; i++) {
    const p = await make(
      s,
      developer.token,
      '/v1/gps',
      gpsBody({ device_id: device, timestamp: t0 + i, latitude: 10 + i }),
    );
    const global = await s.request('GET', '/v1/gps/current', { token: reader.token });
    t.is(global.status, 200);
    t.is(global.body.data.id, p.id);
    const perDevice = await s.request('GET', `/v1/gps/current?device_id=${device}`, { token: reader.token });
    t.is(perDevice.body.data.id, p.id);
    t.is(perDevice.body._links.self, `/v1/gps/${p.id}`);
  }
  // The value is in Redis with the 5-minute TTL.
  const ttl = await s.redis.ttl(`${s.config.redisPrefix}gps:latest:device:${device}`);
  t.true(ttl > 290 && ttl <= 300, String(ttl));
  // An older point (a buffered tracker) does not replace the current position.
  const old = await make(s, developer.token, '/v1/gps', gpsBody({ device_id: device, timestamp: t0 - 50 }));
  const after = await s.request('GET', `/v1/gps/current?device_id=${device}`, { token: reader.token });
  t.not(after.body.data.id, old.id);
  t.is(after.body.data.timestamp, new Date((t0 + 5) * 1000).toISOString());
  // Deleting the latest point drops it from the cache.
  await s.request('DELETE', `/v1/gps/${after.body.data.id}`, { token: admin.token });
  const next = await s.request('GET', `/v1/gps/current?device_id=${device}`, { token: reader.token });
  t.is(next.body.data.timestamp, new Date((t0 + 4) * 1000).toISOString());
  t.is((await s.request('GET', '/v1/gps/current?device_id=never-seen', { token: reader.token })).status, 404);
});

test('a cold cache filled by a reader while writers insert ends up with the true latest point', async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const device = `race-${Date.now()}`;
  const t0 = nowSeconds() + 400;
  await make(s, developer.token, '/v1/gps', gpsBody({ device_id: device, timestamp: t0 }));
  await s.redis.del(`${s.config.redisPrefix}gps:latest:device:${device}`);
  // An old point arriving on a cold cache must not become "current".
  await make(s, developer.token, '/v1/gps', gpsBody({ device_id: device, timestamp: t0 - 100 }));
  const cur = await s.request('GET', `/v1/gps/current?device_id=${device}`, { token: reader.token });
  t.is(cur.body.data.timestamp, new Date(t0 * 1000).toISOString());
  await s.redis.del(`${s.config.redisPrefix}gps:latest:device:${device}`);
  const writes = Array.from({ length: 10 }, (_, i) =>
    make(s, developer.token, '/v1/gps', gpsBody({ device_id: device, timestamp: t0 + 1 + i })),
  );
  const reads = Array.from({ length: 10 }, () =>
    s.request('GET', `/v1/gps/current?device_id=${device}`, { token: reader.token }),
  );
  await Promise.all([...writes, ...reads]);
  const final = await s.request('GET', `/v1/gps/current?device_id=${device}`, { token: reader.token });
  t.is(final.body.data.timestamp, new Date((t0 + 10) * 1000).toISOString());
});

test('GET /v1/gps/current/devices is a bare array with the latest point of each device', async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const tag = Date.now().toString(36);
  const t0 = nowSeconds();
  for (const [device, n] of [
    [`a-${tag}`, 3],
    [`b-${tag}`, 2],
  ] as const) {
    for (let i = 0; i < n; i++)
      await make(s, developer.token, '/v1/gps', gpsBody({ device_id: device, timestamp: t0 + i }));
  }
  const r = await s.request('GET', '/v1/gps/current/devices', { token: reader.token });
  t.is(r.status, 200);
  t.true(Array.isArray(r.body));
  const mine = r.body.filter((p: { device_id: string }) => p.device_id.endsWith(tag));
  t.is(mine.length, 2);
  const a = mine.find((p: { device_id: string }) => p.device_id === `a-${tag}`);
  t.is(a.timestamp, new Date((t0 + 2) * 1000).toISOString());
  t.is(new Set(r.body.map((p: { device_id: string }) => p.device_id)).size, r.body.length);
  t.false(r.body.some((p: { device_id: string | null }) => p.device_id === null));
});

test.serial('GET /v1/gps/current/devices follows every point written or deleted, on every instance', async (t) => {
  const s = stack();
  const { admin, developer, reader } = await users();
  const device = `cached-${Date.now().toString(36)}`;
  const t0 = nowSeconds();
  const second = await startSecondApi(s);
  try {
    const latest = async (url: string) => {
      const r = await fetch(`${url}/v1/gps/current/devices`, { headers: { authorization: `Bearer ${reader.token}` } });
      t.is(r.status, 200);
      const points = (await r.json()) as Array<{ id: string; device_id: string; timestamp: string }>;
      return { etag: r.headers.get('etag'), point: points.find((p) => p.device_id === device) };
    };
    const at = (seconds: number) => new Date(seconds * 1000).toISOString();
    const older = await make(s, developer.token, '/v1/gps', gpsBody({ device_id: device, timestamp: t0 }));
    const first = await latest(s.url);
    t.is(first.point?.timestamp, at(t0));
    t.is((await latest(second.url)).point?.timestamp, at(t0));

    // Served from the cached copy while nothing is written: its ETag answers 304.
    const conditional = await fetch(`${s.url}/v1/gps/current/devices`, {
      headers: { authorization: `Bearer ${reader.token}`, 'if-none-match': first.etag!, 'cache-control': 'max-age=0' },
    });
    t.is(conditional.status, 304);

    // A newer point through the API: both instances answer it on their next request.
    const newer = await make(s, developer.token, '/v1/gps', gpsBody({ device_id: device, timestamp: t0 + 5 }));
    for (const url of [s.url, second.url]) t.is((await latest(url)).point?.id, newer.id);
    // Deleted straight in SQL: the older point is the latest again, everywhere.
    await s.db('gps_points').where('id', newer.id).delete();
    for (const url of [s.url, second.url]) t.is((await latest(url)).point?.id, older.id);
    // Deleted through the API: the device has no point left.
    t.is((await s.request('DELETE', `/v1/gps/${older.id}`, { token: admin.token })).status, 204);
    for (const url of [s.url, second.url]) t.is((await latest(url)).point, undefined);
  } finally {
    await second.close();
  }
});

test('POST /v1/gps/batch: one insert, per-point validation, accepted ids and rejected indexes', async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const device = `batch-${Date.now()}`;
  const points = [
    gpsBody({ device_id: device }),
    gpsBody({ latitude: 200 }),
    gpsBody({ device_id: device, timestamp: nowSeconds() + 1 }),
    { nonsense: true },
    gpsBody({ trip_id: '00000000-0000-4000-8000-000000000000' }),
    // A NUL is a bad value of that point like any other: the point is rejected, not the batch.
    gpsBody({ device_id: 'nul\u0000device' }),
    // One point of a buffered batch from a clock far ahead: that point only.
    gpsBody({ device_id: device, timestamp: nowSeconds() + 86400 }),
  ];
  const r = await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points } });
  t.is(r.status, 201, r.text);
  t.deepEqual(
    r.body.data.accepted.map((a: { index: number }) => a.index),
    [0, 2],
  );
  t.deepEqual(
    r.body.data.rejected.map((x: { index: number }) => x.index),
    [1, 3, 4, 5, 6],
  );
  t.deepEqual(r.body.data.rejected[4].errors, [
    { field: 'timestamp', message: "must not be more than 600 s ahead of the server's clock" },
  ]);
  t.is(r.body.data.rejected[3].errors[0].field, 'device_id');
  t.regex(r.body.data.rejected[3].errors[0].message, /NUL/i);
  t.is(r.body.data.rejected[0].errors[0].field, 'latitude');
  t.true(r.body.data.rejected[1].errors.some((e: { field: string }) => e.field === 'speed_kmh'));
  t.deepEqual(r.body.data.rejected[2].errors, [{ field: 'trip_id', message: 'no such trip' }]);
  const stored = await s.db('gps_points').whereIn(
    'id',
    r.body.data.accepted.map((a: { id: string }) => a.id),
  );
  t.is(stored.length, 2);
  t.true(stored.every((p) => p.device_id === device));
  // The batch is no resource of its own: its self link is the GPS list, which a reader can fetch.
  t.is(r.body._links.self, '/v1/gps');
  t.is((await s.request('GET', r.body._links.self, { token: reader.token })).status, 200);

  // Beside the points, the body gets the text rule of every body: a NUL in a key or a field is a 400.
  for (const body of [
    { points: [gpsBody({ device_id: device })], 'k\u0000': 1 },
    { points: [gpsBody({ device_id: device })], note: 'a\u0000b' },
  ]) {
    const nul = await s.request('POST', '/v1/gps/batch', { token: developer.token, body });
    t.is(nul.status, 400, nul.text);
    t.regex(nul.body.message, /NUL/);
  }

  // A number beyond a double in one point (JSON.parse reads it as Infinity) rejects that point only.
  const point = (p: Record<string, unknown>, field: string) =>
    JSON.stringify(p).replace(new RegExp(`"${field}":[^,}]+`), `"${field}":1e400`);
  // The third point's latitude is too large and (as Infinity) out of range too: still one error.
  const huge = `{"points":[${point(gpsBody({ device_id: device }), 'altitude')},${JSON.stringify(gpsBody())},${point(gpsBody(), 'latitude')},${point(gpsBody(), 'timestamp')}]}`;
  t.true(huge.includes('1e400'));
  const hugeOne = await s.request('POST', '/v1/gps/batch', { token: developer.token, rawBody: huge });
  t.is(hugeOne.status, 201, hugeOne.text);
  t.deepEqual(
    hugeOne.body.data.accepted.map((a: { index: number }) => a.index),
    [1],
  );
  t.deepEqual(hugeOne.body.data.rejected, [
    { index: 0, errors: [{ field: 'altitude', message: 'number too large (beyond ±1.8e308)' }] },
    { index: 2, errors: [{ field: 'latitude', message: 'number too large (beyond ±1.8e308)' }] },
    // The integer timestamp says so too, as every number field does (not "must be an integer").
    { index: 3, errors: [{ field: 'timestamp', message: 'number too large (beyond ±1.8e308)' }] },
  ]);
  // The same number in POST /v1/gps is still refused by the body parser, naming the field.
  const single = await s.request('POST', '/v1/gps', {
    token: developer.token,
    rawBody: JSON.stringify(gpsBody()).replace(/"altitude":[^,}]+/, '"altitude":-1e400'),
  });
  t.is(single.status, 400, single.text);
  t.is(single.body.message, 'altitude: number too large (beyond ±1.8e308)');
  const singleTimestamp = await s.request('POST', '/v1/gps', {
    token: developer.token,
    rawBody: point(gpsBody(), 'timestamp'),
  });
  t.is(singleTimestamp.status, 400, singleTimestamp.text);
  t.is(singleTimestamp.body.message, 'timestamp: number too large (beyond ±1.8e308)');

  const none = await s.request('POST', '/v1/gps/batch', {
    token: developer.token,
    body: { points: [{ latitude: 1 }] },
  });
  t.is(none.status, 400);
  t.regex(none.body.message, /^points\.0\./);
  t.is(none.body.rejected.length, 1);
  t.is((await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points: [] } })).status, 400);
  const tooMany = await s.request('POST', '/v1/gps/batch', {
    token: developer.token,
    body: { points: Array.from({ length: 1001 }, () => gpsBody()) },
  });
  t.is(tooMany.status, 400);
  t.regex(tooMany.body.message, /^points: must contain at most 1000/);
  t.is((await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points: 'x' } })).status, 400);
  t.is((await s.request('POST', '/v1/gps/batch', { token: reader.token, body: { points: [gpsBody()] } })).status, 403);

  const full = await s.request('POST', '/v1/gps/batch', {
    token: developer.token,
    body: {
      points: Array.from({ length: 1000 }, (_, i) => gpsBody({ device_id: device, timestamp: 1_600_000_000 + i })),
    },
  });
  t.is(full.status, 201);
  t.is(full.body.data.accepted.length, 1000);
});

test('POST /v1/gps counts in its own rate-limit tier, raised through configuration here', async (t) => {
  const s = stack();
  const { developer } = await users();
  const r = await s.request('POST', '/v1/gps', { token: developer.token, body: gpsBody() });
  t.is(r.status, 201);
  t.is(r.headers.get('x-ratelimit-limit'), '10000');
});

test('the OpenAPI document describes the tracking routes', async (t) => {
  const s = stack();
  const doc = await s.request('GET', '/v1/openapi.json');
  t.is(doc.status, 200);
  for (const p of [
    '/v1/gps',
    '/v1/gps/batch',
    '/v1/gps/current',
    '/v1/gps/current/devices',
    '/v1/gps/{id}',
    '/v1/devices/{id}',
    '/v1/trips/{id}/gpx',
    '/v1/trips/{id}/history',
    '/v1/locations/{id}/contacts/{cid}',
    '/v1/geofences',
    '/v1/trip-categories',
    '/v1/trip-templates/{id}/create-trip',
  ]) {
    t.truthy(doc.body.paths[p], p);
  }
  t.truthy(doc.body.components.schemas.GpsPoint);
  t.truthy(doc.body.paths['/v1/gps'].post.requestBody);
});

test('a point deleted while a reader fills a cold cache is not kept as the current one', async (t) => {
  const s = stack();
  const { developer, reader, admin } = await users();
  const device = `delete-race-${Date.now()}`;
  const key = `${s.config.redisPrefix}gps:latest:device:${device}`;
  const t0 = nowSeconds() - 100_000;
  const first = await make(s, developer.token, '/v1/gps', gpsBody({ device_id: device, timestamp: t0 }));
  const current = () => s.request('GET', `/v1/gps/current?device_id=${device}`, { token: reader.token });
  // The race: a reader reads the database (the point still there), the delete commits and drops
  // the key, then the reader's fill lands. Repeated with staggered starts; it hit about 1 in 10.
  for (let i = 1; i <= 120; i++) {
    const p = await make(s, developer.token, '/v1/gps', gpsBody({ device_id: device, timestamp: t0 + i }));
    await s.redis.del(key);
    const delay = i % 6;
    await Promise.all([
      ...Array.from({ length: 4 }, current),
      new Promise((r) => setTimeout(r, delay / 2)).then(() =>
        s.request('DELETE', `/v1/gps/${p.id}`, { token: admin.token }),
      ),
      ...Array.from({ length: 4 }, () => new Promise((r) => setTimeout(r, delay)).then(current)),
    ]);
    const after = await current();
    // Every later point is deleted: the first one is the current one again.
    if (after.status !== 200 || after.body.data?.id !== first.id) {
      t.fail(`round ${i}: ${after.status}, current ${after.body.data?.id} (deleted ${p.id}, expected ${first.id})`);
      return;
    }
  }
  t.pass();
});

test.serial(
  'POST /v1/gps/batch: a trip deleted between the check and the insert rejects its points only',
  async (t) => {
    const s = stack();
    const { developer } = await users();
    const trip = await make(s, developer.token, '/v1/trips', { name: 'deleted mid-batch' });
    // The trip is checked (it exists), then deleted while the insert waits for its row.
    const trx = await s.db.transaction();
    await trx.raw('SELECT 1 FROM trips WHERE id = ? FOR UPDATE', [trip.id]);
    const batch = s.request('POST', '/v1/gps/batch', {
      token: developer.token,
      body: {
        points: [gpsBody({ trip_id: trip.id }), gpsBody({ device_id: 'mid-batch' }), gpsBody({ trip_id: trip.id })],
      },
    });
    await lockWaiters(s.db, 1);
    await trx('trips').where('id', trip.id).delete();
    await trx.commit();
    const r = await batch;
    t.is(r.status, 201, r.text);
    t.deepEqual(
      r.body.data.accepted.map((a: { index: number }) => a.index),
      [1],
    );
    t.deepEqual(r.body.data.rejected, [
      { index: 0, errors: [{ field: 'trip_id', message: 'no such trip' }] },
      { index: 2, errors: [{ field: 'trip_id', message: 'no such trip' }] },
    ]);
    t.truthy(await s.db('gps_points').where('id', r.body.data.accepted[0].id).first());
  },
);
