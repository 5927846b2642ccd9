import test from 'ava';
import { haversineKm } from '../../shared/geo';
import { down, up } from '../../migrations/20261129000000_trip_track_stats';
import * as pointCounts from '../../migrations/20261130000000_trip_point_counts';
import * as truncateBumps from '../../migrations/20261201000000_trip_track_truncate_bumps';
import * as incremental from '../../migrations/20261207000100_incremental_trip_stats';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody, make } from '../helpers/tracking';

const stack = useStack(test);

test('the trip_track_stats migration finds every trip that already has points; their figures are right on first read', async (t) => {
  const s = stack();
  const developer = await createUser(s.db, { roles: ['role_developer'] });
  const trips: Array<{ id: string }> = [];
  for (let k = 0; k < 3; k++) trips.push(await make(s, developer.token, '/v1/trips', { name: `before ${k}` }));
  // The later migrations of trip_track_stats are undone first and redone after, as on a database
  // migrated from before this one.
  const later = [pointCounts, truncateBumps, incremental];
  for (const m of [...later].reverse()) await s.db.transaction((trx) => m.down(trx));
  await down(s.db);
  // Points stored before the migration (trip 2 has none), and one without a trip.
  const point = (tripId: string | null, i: number) => ({
    trip_id: tripId,
    latitude: 45 + i * 0.01,
    longitude: 6,
    timestamp: new Date((1_700_500_000 + i * 30) * 1000),
    speed_kmh: 1,
    speed_mps: 1,
    speed_mph: 1,
    speed_knots: 1,
  });
  await s
    .db('gps_points')
    .insert([
      point(trips[0].id, 0),
      point(trips[0].id, 1),
      point(trips[1].id, 0),
      point(trips[1].id, 1),
      point(trips[1].id, 2),
      point(null, 0),
    ]);
  await up(s.db);
  for (const m of later) await s.db.transaction((trx) => m.up(trx));
  const rows = await s.db('trip_track_stats').select('trip_id', 'stats_version');
  t.deepEqual(rows.map((r) => r.trip_id).sort(), [trips[0].id, trips[1].id].sort());
  t.true(
    rows.every((r) => r.stats_version === null),
    'computed on first read, not in the migration',
  );
  const leg = haversineKm(45, 6, 45.01, 6);
  for (const [k, legs] of [
    [0, 1],
    [1, 2],
    [2, 0],
  ] as const) {
    const r = await s.request('GET', `/v1/trips/${trips[k].id}`, { token: developer.token });
    t.is(r.status, 200, r.text);
    t.true(Math.abs(r.body.data.distance_km - legs * leg) < 0.002, `trip ${k}: ${r.body.data.distance_km}`);
    t.is(r.body.data.duration_seconds, legs * 30);
  }
  // After the migration, new points keep the figures current.
  const more = await s.request('POST', '/v1/gps', {
    token: developer.token,
    body: gpsBody({ trip_id: trips[2].id, latitude: 45, longitude: 6, timestamp: 1_700_500_000 }),
  });
  t.is(more.status, 201, more.text);
  const again = await s.request('POST', '/v1/gps', {
    token: developer.token,
    body: gpsBody({ trip_id: trips[2].id, latitude: 45.01, longitude: 6, timestamp: 1_700_500_060 }),
  });
  t.is(again.status, 201, again.text);
  const r = await s.request('GET', `/v1/trips/${trips[2].id}`, { token: developer.token });
  t.true(Math.abs(r.body.data.distance_km - leg) < 0.002);
  t.is(r.body.data.duration_seconds, 60);
});
