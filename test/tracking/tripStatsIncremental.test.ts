import test from 'ava';
import { EARTH_RADIUS_KM, haversineSql } from '../../shared/geo';
import { explainJson } from '../helpers/statements';
import { useStack } from '../helpers/stack';
import { adminAndDeveloper, gpsBody, make, pointRow } from '../helpers/tracking';

// A trip's distance and duration are brought up to date from the new points alone when its track
// only grew at its end (migration 20261207000100_incremental_trip_stats, shared/queries/gpsPoints.ts
// tripStats), and recomputed over the whole track after any other change. Either way they are what
// a full computation over the track gives.
const stack = useStack(test, { env: { RATE_LIMIT_GPS_POST: '10000', RATE_LIMIT_USER: '10000' } });

const users = adminAndDeveloper(stack);

const T0 = 1_700_700_000;

/** The i-th point of a wandering track (no two legs alike), `i` seconds × 7 after T0. */
const at = (i: number) => ({
  latitude: 47 + i * 0.0013 + Math.sin(i) * 0.0007,
  longitude: 8 + i * 0.0009 + Math.cos(i * 1.7) * 0.001,
  timestamp: T0 + i * 7,
});

/** Distance and duration over every point of the trip, as a full computation gives them. */
async function full(tripId: string): Promise<{ distance: number; duration: number }> {
  const { rows } = await stack().db.raw(
    `SELECT COALESCE(SUM(${haversineSql('plat', 'plon', 'latitude', 'longitude')}), 0)::float8 AS distance,
            COALESCE(EXTRACT(EPOCH FROM MAX(ts) - MIN(ts)), 0)::float8 AS duration
       FROM (SELECT latitude, longitude, "timestamp" AS ts, lag(latitude) OVER w AS plat, lag(longitude) OVER w AS plon
               FROM gps_points WHERE trip_id = ? WINDOW w AS (ORDER BY "timestamp", created_at, id)) legs`,
    [EARTH_RADIUS_KM, tripId],
  );
  return { distance: Number(rows[0].distance), duration: Number(rows[0].duration) };
}

const statsRow = async (tripId: string) => stack().db('trip_track_stats').where('trip_id', tripId).first();

/**
 * Reads the trip (GET /v1/trips/{id}) and checks its figures, and the stored ones, against a full
 * computation. `path`: whether the stored row says the read may add legs (`added`) or must
 * recompute the track (`whole`).
 */
async function check(
  t: import('ava').ExecutionContext,
  tripId: string,
  path: 'added' | 'whole',
  when: string,
): Promise<void> {
  const s = stack();
  const { developer } = await users();
  const before = await statsRow(tripId);
  t.not(before.stats_version, before.version, `${when}: the stored figures are stale`);
  t.is(before.appends_only && before.stats_version !== null, path === 'added', `${when}: ${path}`);
  const r = await s.request('GET', `/v1/trips/${tripId}`, { token: developer.token });
  t.is(r.status, 200, r.text);
  const want = await full(tripId);
  const stored = await statsRow(tripId);
  t.is(stored.stats_version, stored.version, `${when}: stored`);
  t.true(stored.appends_only, `${when}: the next append may add its legs`);
  const diff = Math.abs(stored.distance_km - want.distance);
  t.true(diff <= 1e-9 * Math.max(1, want.distance), `${when}: distance ${stored.distance_km} vs ${want.distance}`);
  t.is(stored.duration_seconds, want.duration, `${when}: duration`);
  t.is(r.body.data.distance_km, Math.round(want.distance * 1000) / 1000, `${when}: answered distance`);
  t.is(r.body.data.duration_seconds, Math.round(want.duration), `${when}: answered duration`);
}

test.serial(
  'appended points, one by one and in batches, are added leg by leg and equal a full computation',
  async (t) => {
    const s = stack();
    const { developer } = await users();
    const trip = await make(s, developer.token, '/v1/trips', { name: 'appended' });
    const post = async (i: number, over: Record<string, unknown> = {}) => {
      const r = await s.request('POST', '/v1/gps', {
        token: developer.token,
        body: gpsBody({ trip_id: trip.id, ...at(i), ...over }),
      });
      t.is(r.status, 201, r.text);
    };
    const batch = async (is: number[]) => {
      const points = is.map((i) => gpsBody({ trip_id: trip.id, ...at(i) }));
      const r = await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points } });
      t.is(r.status, 201, r.text);
    };
    await post(0);
    await check(t, trip.id, 'whole', 'the first point');
    for (let i = 1; i < 12; i++) {
      await post(i);
      await check(t, trip.id, 'added', `single point ${i}`);
    }
    // Two statements between reads.
    await post(12);
    await post(13);
    await check(t, trip.id, 'added', 'two single points');
    // A batch in track order, and one whose points come in any order but all after the last.
    await batch(Array.from({ length: 25 }, (_, k) => 14 + k));
    await check(t, trip.id, 'added', 'a batch');
    await batch([45, 39, 44, 40, 43, 41, 42]);
    await check(t, trip.id, 'added', 'a shuffled batch after the last point');
    // Concurrent single points (group commit: one INSERT of several points).
    await Promise.all([46, 47, 48, 49, 50].map((i) => post(i)));
    await check(t, trip.id, 'added', 'concurrent single points');
    // The same second as the last point, written later: after it in track order (created_at).
    await post(51, { timestamp: at(50).timestamp });
    await check(t, trip.id, 'added', 'the same timestamp, a later write');
    // Many points in one statement, written directly.
    await s.db('gps_points').insert(Array.from({ length: 400 }, (_, k) => pointRow(trip.id, at(52 + k))));
    await check(t, trip.id, 'added', '400 points in one statement');
  },
);

test.serial('out of order, deleted and changed points make the read recompute the track, and stay exact', async (t) => {
  const s = stack();
  const { developer } = await users();
  const trip = await make(s, developer.token, '/v1/trips', { name: 'rewritten' });
  const other = await make(s, developer.token, '/v1/trips', { name: 'other' });
  const insert = (i: number, over: Record<string, unknown> = {}) =>
    s.db('gps_points').insert({ ...pointRow(trip.id, at(i)), ...over });
  await s.db('gps_points').insert(Array.from({ length: 30 }, (_, k) => pointRow(trip.id, at(k * 2))));
  await check(t, trip.id, 'whole', 'thirty points');

  // Before the last point, between two others.
  await insert(31);
  await check(t, trip.id, 'whole', 'a point out of order');
  await insert(60);
  await check(t, trip.id, 'added', 'an append after a recomputation');
  // Appended, then one out of order, before a read.
  await insert(62);
  await insert(33);
  await check(t, trip.id, 'whole', 'an append and a point out of order');

  // Deleted: a point in the middle, then the last point (the stored start of the next legs).
  const middle = await s.db('gps_points').where('trip_id', trip.id).orderBy('timestamp').offset(10).first('id');
  await s.db('gps_points').where('id', middle.id).delete();
  await check(t, trip.id, 'whole', 'a point deleted');
  const last = await s.db('gps_points').where('trip_id', trip.id).orderBy('timestamp', 'desc').first('id');
  await s.db('gps_points').where('id', last.id).delete();
  await check(t, trip.id, 'whole', 'the last point deleted');
  await insert(70);
  await check(t, trip.id, 'added', 'an append after the last point was deleted');

  // Changed: a point moved, points moved in from another trip.
  const some = await s.db('gps_points').where('trip_id', trip.id).orderBy('timestamp').offset(5).first('id');
  await s.db('gps_points').where('id', some.id).update({ latitude: 47.5 });
  await check(t, trip.id, 'whole', 'a point moved');
  await s.db('gps_points').insert([pointRow(other.id, at(71)), pointRow(other.id, at(3))]);
  await s.db('gps_points').where('trip_id', other.id).update({ trip_id: trip.id });
  await check(t, trip.id, 'whole', "another trip's points moved in");

  // The last point's timestamp with an earlier creation time: before it in track order.
  const stored = await statsRow(trip.id);
  await insert(80, { timestamp: stored.last_ts, created_at: new Date(stored.last_created_at.getTime() - 1000) });
  await check(t, trip.id, 'whole', 'the last timestamp, created earlier');
  // The same timestamp and creation time (order by id only): taken as out of order.
  const again = await statsRow(trip.id);
  await insert(81, { timestamp: again.last_ts, created_at: again.last_created_at });
  await check(t, trip.id, 'whole', 'the last timestamp and creation time');
  await insert(90);
  await check(t, trip.id, 'added', 'an append at the end');

  // TRUNCATE empties every track; what comes after starts a new one.
  await s.db.raw('TRUNCATE gps_points');
  await insert(100);
  await insert(101);
  await check(t, trip.id, 'whole', 'after TRUNCATE');
});

test.serial('an append is read from the new points only, not the whole track', async (t) => {
  const s = stack();
  const { developer } = await users();
  const trip = await make(s, developer.token, '/v1/trips', { name: 'long track' });
  await s.db.raw(
    `INSERT INTO gps_points (trip_id, latitude, longitude, timestamp, speed_kmh, speed_mps, speed_mph, speed_knots)
     SELECT ?, 47 + g * 0.0001, 8 + sin(g) * 0.001, to_timestamp(?::float8 + g * 5), 1, 1, 1, 1 FROM generate_series(1, 3000) g`,
    [trip.id, T0],
  );
  // The statement GET /v1/trips/{id} sends for the stats.
  let statement: { sql: string; bindings: unknown[] } | undefined;
  const listen = (q: { sql: string; bindings: unknown[] }) => {
    if (/trip_track_stats/.test(q.sql) && /lag\(latitude/.test(q.sql)) statement = q;
  };
  s.db.on('query', listen);
  const first = await s.request('GET', `/v1/trips/${trip.id}`, { token: developer.token });
  s.db.off('query', listen);
  t.is(first.status, 200, first.text);
  t.truthy(statement, 'the stats statement ran');
  // Four points appended; the statement run again, as the next read would, with EXPLAIN ANALYZE.
  const points = [0, 1, 2, 3].map((k) =>
    gpsBody({ trip_id: trip.id, latitude: 47.4, longitude: 8 + k * 0.001, timestamp: T0 + 20_000 + k }),
  );
  t.is((await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points } })).status, 201);
  const plan = await explainJson(s.db, statement!, { analyze: true });
  type PlanNode = {
    'Node Type': string;
    'Relation Name'?: string;
    'Index Name'?: string;
    'Actual Rows'?: number;
    'Actual Loops'?: number;
    'Rows Removed by Filter'?: number;
    'Rows Removed by Index Recheck'?: number;
    Plans?: PlanNode[];
  };
  // Every row any scan of gps_points produced or filtered out.
  let read = 0;
  const walk = (n: PlanNode) => {
    if (n['Relation Name'] === 'gps_points')
      read +=
        (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 1) +
        (n['Rows Removed by Filter'] ?? 0) +
        (n['Rows Removed by Index Recheck'] ?? 0);
    n.Plans?.forEach(walk);
  };
  (JSON.parse(plan) as Array<{ Plan: PlanNode }>).forEach((p) => walk(p.Plan));
  // The four new points, and the last point (one probe from the end of the track).
  t.true(read <= 5, `${read} rows of gps_points read: ${plan}`);
  t.true(read >= 4, `${read} rows of gps_points read`);
  // What that read stored is what a full computation gives.
  const want = await full(trip.id);
  const stored = await statsRow(trip.id);
  t.is(stored.stats_version, stored.version);
  t.true(
    Math.abs(stored.distance_km - want.distance) <= 1e-9 * want.distance,
    `${stored.distance_km} vs ${want.distance}`,
  );
  t.is(stored.duration_seconds, want.duration);
});
