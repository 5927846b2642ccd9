import test from 'ava';
import { down, up } from '../../migrations/20261130000000_trip_point_counts';
import * as truncateBumps from '../../migrations/20261201000000_trip_track_truncate_bumps';
import * as incremental from '../../migrations/20261207000100_incremental_trip_stats';
import { TRIP_DETACH_BATCH } from '../../shared/commands/trips';
import { statementsOn } from '../helpers/statements';
import { useStack } from '../helpers/stack';
import { adminAndDeveloper, countRows, gpsBody, make, pointRow } from '../helpers/tracking';

const stack = useStack(test);

const users = adminAndDeveloper(stack);

/** A point row as the database takes it directly (retention and imports write without the API). */
const row = (tripId: string | null, i: number) =>
  pointRow(tripId, { latitude: 45 + i * 0.001, longitude: 6, timestamp: 1_700_600_000 + i });

test.serial("a trip's page total is its stored count, exact through every kind of write", async (t) => {
  const s = stack();
  const { admin, developer } = await users();
  const [a, b] = [
    await make(s, developer.token, '/v1/trips', { name: 'counted a' }),
    await make(s, developer.token, '/v1/trips', { name: 'counted b' }),
  ];
  const stored = async (tripId: string) =>
    Number((await s.db('trip_track_stats').where('trip_id', tripId).first())?.points ?? 0);
  const counted = (tripId: string) => countRows(s.db('gps_points').where('trip_id', tripId));
  /** The API's total, the stored count and a COUNT over the points agree, and equal `n`. */
  const expect = async (tripId: string, n: number, when: string) => {
    const r = await s.request('GET', `/v1/trips/${tripId}/gps?limit=1`, { token: developer.token });
    t.is(r.status, 200, r.text);
    t.is(r.body.pagination.total, n, `${when}: API total`);
    t.is(await stored(tripId), n, `${when}: stored`);
    t.is(await counted(tripId), n, `${when}: counted`);
  };
  await expect(a.id, 0, 'no points');

  // Single points (group commit: concurrent requests share one INSERT).
  const single = await Promise.all(
    [0, 1, 2, 3, 4].map((i) =>
      s.request('POST', '/v1/gps', {
        token: developer.token,
        body: gpsBody({ trip_id: a.id, latitude: 45, longitude: 6 + i * 0.01, timestamp: 1_700_600_000 + i }),
      }),
    ),
  );
  t.true(
    single.every((r) => r.status === 201),
    single.map((r) => r.text).join('\n'),
  );
  await expect(a.id, 5, 'five single points');

  // A batch spanning both trips and none.
  const points = [
    ...[0, 1, 2].map((i) => gpsBody({ trip_id: a.id, latitude: 45.5, longitude: 6, timestamp: 1_700_600_100 + i })),
    ...[0, 1].map((i) => gpsBody({ trip_id: b.id, latitude: 45.5, longitude: 6, timestamp: 1_700_600_200 + i })),
    gpsBody({ latitude: 45.5, longitude: 6, timestamp: 1_700_600_300 }),
  ];
  const batch = await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points } });
  t.is(batch.status, 201, batch.text);
  await expect(a.id, 8, 'after a batch');
  await expect(b.id, 2, 'after a batch');

  // Written directly, and a rolled-back write that changes nothing.
  await s.db('gps_points').insert([row(b.id, 0), row(b.id, 1), row(b.id, 2)]);
  await s.db
    .transaction(async (trx) => {
      await trx('gps_points').insert([row(b.id, 3), row(b.id, 4)]);
      throw new Error('rolled back');
    })
    .catch(() => undefined);
  await expect(b.id, 5, 'direct insert and a rollback');

  // Moving points from one trip to another counts on both sides; an update within a trip nets 0.
  const moved = await s.db('gps_points').where('trip_id', a.id).orderBy('timestamp').limit(3).pluck('id');
  t.is(await s.db('gps_points').whereIn('id', moved).update({ trip_id: b.id }), 3);
  await expect(a.id, 5, 'three moved away');
  await expect(b.id, 8, 'three moved in');
  await s.db('gps_points').where('trip_id', b.id).update({ hdop: 1.5 });
  await expect(b.id, 8, 'an update within the trip');
  // Detached from any trip, then deleted.
  await s.db('gps_points').whereIn('id', moved.slice(0, 1)).update({ trip_id: null });
  await expect(b.id, 7, 'one detached');
  const gone = await s.db('gps_points').where('trip_id', a.id).orderBy('timestamp').limit(2).pluck('id');
  t.is(await s.db('gps_points').whereIn('id', gone).delete(), 2);
  await expect(a.id, 3, 'two deleted');

  // Deleting the trip removes its count with its row; its points stay, without a trip.
  t.is((await s.request('DELETE', `/v1/trips/${b.id}`, { token: admin.token })).status, 204);
  t.falsy(await s.db('trip_track_stats').where('trip_id', b.id).first());
  await expect(a.id, 3, "the other trip's deletion");

  // The total is read from the stored count, not counted: a planted count is what the page says.
  await s.db('trip_track_stats').where('trip_id', a.id).update({ points: 999 });
  // (A write to the trip's row: the page is built again rather than taken from the response cache.)
  await s.db('trips').where('id', a.id).update({ notes: 'touched' });
  const planted = await s.request('GET', `/v1/trips/${a.id}/gps`, { token: developer.token });
  t.is(planted.body.pagination.total, 999);
  t.is(planted.body.data.length, 3);
  await s.db('trip_track_stats').where('trip_id', a.id).update({ points: 3 });
});

test.serial('the migration counts the points already stored, and the trigger keeps counting after it', async (t) => {
  const s = stack();
  const { developer } = await users();
  const trips: Array<{ id: string }> = [];
  for (let k = 0; k < 3; k++) trips.push(await make(s, developer.token, '/v1/trips', { name: `before count ${k}` }));
  // The later migrations of the same trigger are undone first and redone after.
  const later = [truncateBumps, incremental];
  for (const m of [...later].reverse()) await s.db.transaction((trx) => m.down(trx));
  await s.db.transaction((trx) => down(trx));
  t.false(
    (
      await s.db.raw(
        `SELECT 1 FROM information_schema.columns WHERE table_name = 'trip_track_stats' AND column_name = 'points'`,
      )
    ).rows.length > 0,
    'down drops the column',
  );
  // Points written while the trigger kept versions only (trip 2 has none).
  await s.db('gps_points').insert([row(trips[0].id, 0), row(trips[0].id, 1), row(trips[1].id, 0), row(null, 0)]);
  await s.db('gps_points').insert([row(trips[1].id, 1), row(trips[1].id, 2)]);
  // As knex runs a migration: in one transaction.
  await s.db.transaction((trx) => up(trx));
  for (const m of later) await s.db.transaction((trx) => m.up(trx));
  const total = async (k: number) =>
    (await s.request('GET', `/v1/trips/${trips[k].id}/gps`, { token: developer.token })).body.pagination.total;
  t.deepEqual([await total(0), await total(1), await total(2)], [2, 3, 0]);
  await s.db('gps_points').insert([row(trips[2].id, 0)]);
  const one = await s.db('gps_points').where('trip_id', trips[0].id).first('id');
  await s.db('gps_points').where('id', one.id).delete();
  t.deepEqual([await total(0), await total(1), await total(2)], [1, 3, 1]);
});

test.serial(
  "a trip's deep pages are read from its end and pages past the end read nothing: the same points",
  async (t) => {
    const s = stack();
    const { developer } = await users();
    const trip = await make(s, developer.token, '/v1/trips', { name: 'deep track' });
    // 1,503 points with ties on timestamp and created_at (the id breaks them).
    await s.db.raw(
      `INSERT INTO gps_points (trip_id, latitude, longitude, timestamp, speed_kmh, speed_mps, speed_mph, speed_knots, created_at)
     SELECT ?, 45, 6, timestamptz '2026-01-01' + (g / 5) * interval '1 second', 1, 1, 1, 1,
            timestamptz '2026-01-02' + (g % 3) * interval '1 second'
       FROM generate_series(1, 1503) g`,
      [trip.id],
    );
    const forward = async (limit: number, offset: number) =>
      (
        await s.db.raw(
          'SELECT id FROM gps_points WHERE trip_id = ? ORDER BY timestamp, created_at, id LIMIT ? OFFSET ?',
          [trip.id, limit, offset],
        )
      ).rows.map((r: { id: string }) => r.id);
    for (const [limit, page] of [
      [10, 1],
      [100, 8],
      [100, 9],
      [100, 15],
      [100, 16],
      [7, 200],
      [7, 215],
      [1, 1503],
      [100, 17],
      [10, 1000000],
    ]) {
      const r = await s.request('GET', `/v1/trips/${trip.id}/gps?limit=${limit}&page=${page}`, {
        token: developer.token,
      });
      const label = `limit ${limit} page ${page}`;
      t.is(r.status, 200, r.text);
      t.deepEqual(
        r.body.data.map((p: { id: string }) => p.id),
        await forward(limit, (page - 1) * limit),
        label,
      );
      t.deepEqual([r.body.pagination.total, r.body.pagination.total_pages], [1503, Math.ceil(1503 / limit)], label);
    }
  },
);

test.serial('a long trip is deleted with its points detached in batches, each statement bounded', async (t) => {
  const s = stack();
  const { admin, developer } = await users();
  const trip = await make(s, developer.token, '/v1/trips', { name: 'long trip' });
  const n = 2 * TRIP_DETACH_BATCH + 5;
  await s.db.raw(
    `INSERT INTO gps_points (trip_id, device_id, latitude, longitude, "timestamp", speed_kmh, speed_mps, speed_mph, speed_knots)
     SELECT ?, 'long-trip-device-' || (g % 3), 45, 6, to_timestamp(1700000000 + g), 1, 1, 1, 1 FROM generate_series(1, ?) g`,
    [trip.id, n],
  );
  const { result, sql } = await statementsOn(s.db, 'gps_points', () =>
    s.request('DELETE', `/v1/trips/${trip.id}`, { token: admin.token }),
  );
  t.is(result.status, 204, result.text);
  // Three batches (two full, one of 5): no statement rewrites the whole track.
  t.is(sql.filter((q) => /^\s*with detached as \(\s*update gps_points/i.test(q)).length, 3, sql.join('\n'));
  t.is(await countRows(s.db('gps_points').where('trip_id', trip.id)), 0);
  t.is(
    await countRows(s.db('gps_points').whereNull('trip_id').where('device_id', 'like', 'long-trip-device-%')),
    n,
    'the points stay, without a trip',
  );
  t.falsy(await s.db('trips').where('id', trip.id).first());
  t.falsy(await s.db('trip_track_stats').where('trip_id', trip.id).first());
});
