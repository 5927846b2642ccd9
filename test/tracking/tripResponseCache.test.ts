import test from 'ava';
import { startSecondApi } from '../helpers/secondApi';
import { useStack } from '../helpers/stack';
import { statementsOn } from '../helpers/statements';
import { adminAndDeveloper, gpsBody, make, pointRow } from '../helpers/tracking';

/**
 * README "Hot paths" (response cache, keyed versions): GET /v1/trips/{id}, /gps and /gpx are answered
 * from a per-process copy while the trips table and the trip's track version are unchanged. Every
 * kind of write to the trip's points (API, batch, SQL insert, update, delete, TRUNCATE) is seen on
 * the next request of every instance; a repeat reads no point.
 */
const stack = useStack(test);

const users = adminAndDeveloper(stack);

/** A point row as the database takes it directly (an operator's SQL, an import). */
const row = (tripId: string, latitude: number, second: number) =>
  pointRow(tripId, { latitude, longitude: 7, timestamp: 1_700_900_000 + second });

interface Answer {
  status: number;
  etag: string | null;
  type: string | null;
  disposition: string | null;
  text: string;
}

async function get(base: string, path: string, token: string): Promise<Answer> {
  const r = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
  return {
    status: r.status,
    etag: r.headers.get('etag'),
    type: r.headers.get('content-type'),
    disposition: r.headers.get('content-disposition'),
    text: await r.text(),
  };
}

/** What the three answers say about the track: the page's latitudes and total, the GPX's points, the distance. */
async function track(base: string, tripId: string, token: string) {
  const page = await get(base, `/v1/trips/${tripId}/gps?limit=100`, token);
  const gpx = await get(base, `/v1/trips/${tripId}/gpx`, token);
  const one = await get(base, `/v1/trips/${tripId}`, token);
  for (const a of [page, gpx, one]) if (a.status !== 200) throw new Error(`${a.status} ${a.text}`);
  const body = JSON.parse(page.text) as { data: Array<{ latitude: number }>; pagination: { total: number } };
  return {
    latitudes: body.data.map((p) => p.latitude).sort((a, b) => a - b),
    total: body.pagination.total,
    gpxLatitudes: [...gpx.text.matchAll(/<trkpt lat="([-0-9.]+)"/g)].map((m) => Number(m[1])).sort((a, b) => a - b),
    distance: (JSON.parse(one.text) as { data: { distance_km: number } }).data.distance_km,
    etags: [page.etag, gpx.etag, one.etag],
  };
}

test.serial("a trip's points, GPX and figures follow every write to its points, on every instance", async (t) => {
  const s = stack();
  const { developer } = await users();
  const trip = await make(s, developer.token, '/v1/trips', { name: 'cached track' });
  const second = await startSecondApi(s);
  try {
    const batch = [46.1, 46.2].map((latitude, i) =>
      gpsBody({ trip_id: trip.id, latitude, longitude: 7, timestamp: 1_700_900_000 + i }),
    );
    t.is((await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points: batch } })).status, 201);
    const first = await track(s.url, trip.id, developer.token);
    t.deepEqual(first.latitudes, [46.1, 46.2]);
    t.deepEqual(first.gpxLatitudes, [46.1, 46.2]);
    t.true(first.distance > 11);

    // A repeat is the same answer, read without a statement on the points; the GPX keeps its type
    // and file name; the ETag answers 304.
    const repeat = await statementsOn(s.db, 'gps_points', () => track(s.url, trip.id, developer.token));
    t.is(repeat.count, 0, repeat.sql.join('\n'));
    t.deepEqual(repeat.result, first);
    const gpx = await get(s.url, `/v1/trips/${trip.id}/gpx`, developer.token);
    t.regex(gpx.type ?? '', /^application\/gpx\+xml/);
    t.is(gpx.disposition, `attachment; filename="trip-${trip.id}.gpx"`);
    const conditional = await fetch(`${s.url}/v1/trips/${trip.id}/gpx`, {
      headers: { authorization: `Bearer ${developer.token}`, 'if-none-match': gpx.etag!, 'cache-control': 'max-age=0' },
    });
    t.is(conditional.status, 304);
    t.deepEqual(await track(second.url, trip.id, developer.token), first);

    // Each kind of write: both instances answer the new track at once.
    let previous = first;
    const expectTrack = async (latitudes: number[], when: string) => {
      for (const base of [s.url, second.url]) {
        const now = await track(base, trip.id, developer.token);
        t.deepEqual(now.latitudes, latitudes, when);
        t.deepEqual(now.gpxLatitudes, latitudes, when);
        t.is(now.total, latitudes.length, when);
        for (let i = 0; i < 3; i++) t.not(now.etags[i], previous.etags[i], `${when}: answer ${i} is new`);
      }
      previous = await track(s.url, trip.id, developer.token);
    };
    const single = await s.request('POST', '/v1/gps', {
      token: developer.token,
      body: gpsBody({ trip_id: trip.id, latitude: 46.3, longitude: 7, timestamp: 1_700_900_010 }),
    });
    t.is(single.status, 201);
    await expectTrack([46.1, 46.2, 46.3], 'single POST');
    await s.db('gps_points').insert(row(trip.id, 46.4, 20));
    await expectTrack([46.1, 46.2, 46.3, 46.4], 'SQL insert');
    await s.db('gps_points').where({ trip_id: trip.id, latitude: 46.4 }).update({ latitude: 46.5 });
    await expectTrack([46.1, 46.2, 46.3, 46.5], 'SQL update');
    await s.db('gps_points').where({ trip_id: trip.id, latitude: 46.1 }).delete();
    await expectTrack([46.2, 46.3, 46.5], 'SQL delete');
    const distanceBefore = previous.distance;
    await s.db('gps_points').where({ trip_id: trip.id, latitude: 46.5 }).update({ trip_id: null });
    await expectTrack([46.2, 46.3], 'a point moved off the trip');
    t.true(previous.distance < distanceBefore);

    // A change to the trip itself (not its points) is seen too.
    await s.db('trips').where('id', trip.id).update({ name: 'renamed in sql' });
    for (const base of [s.url, second.url]) {
      t.regex((await get(base, `/v1/trips/${trip.id}/gpx`, developer.token)).text, /<name>renamed in sql<\/name>/);
      t.is(JSON.parse((await get(base, `/v1/trips/${trip.id}`, developer.token)).text).data.name, 'renamed in sql');
    }
  } finally {
    await second.close();
  }
});

test.serial('after TRUNCATE a trip never reaches a track version it had before', async (t) => {
  const s = stack();
  const { developer } = await users();
  const trip = await make(s, developer.token, '/v1/trips', { name: 'truncated track' });
  // Three statements: the trip's track version moves three times.
  for (let i = 0; i < 3; i++) await s.db('gps_points').insert(row(trip.id, 47 + i / 10, i));
  t.deepEqual((await track(s.url, trip.id, developer.token)).latitudes, [47, 47.1, 47.2]);
  await s.db.raw('TRUNCATE gps_points');
  // Not read in between: three new statements would bring a restarted version back to where the
  // cached answer was made.
  for (let i = 0; i < 3; i++) await s.db('gps_points').insert(row(trip.id, 48 + i / 10, i));
  const after = await track(s.url, trip.id, developer.token);
  t.deepEqual(after.latitudes, [48, 48.1, 48.2]);
  t.deepEqual(after.gpxLatitudes, [48, 48.1, 48.2]);
  t.is(after.total, 3);
  const stats = await s.db('trip_track_stats').where('trip_id', trip.id).first();
  t.is(Number(stats.points), 3);
});

test.serial('a deleted trip is 404 at once on all three, though its answers were cached', async (t) => {
  const s = stack();
  const { admin, developer } = await users();
  const trip = await make(s, developer.token, '/v1/trips', { name: 'deleted cached' });
  await s.db('gps_points').insert(row(trip.id, 49, 0));
  await track(s.url, trip.id, developer.token);
  t.is((await s.request('DELETE', `/v1/trips/${trip.id}`, { token: admin.token })).status, 204);
  for (const path of [`/v1/trips/${trip.id}/gps?limit=100`, `/v1/trips/${trip.id}/gpx`, `/v1/trips/${trip.id}`])
    t.is((await get(s.url, path, developer.token)).status, 404, path);
});
