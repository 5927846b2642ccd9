import test from 'ava';
import { randomUUID } from 'node:crypto';
import { down, up } from '../../migrations/20261216000000_geofence_event_identity';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test.serial('the event identity migration keeps the first of duplicate events, then refuses another', async (t) => {
  const s = stack();
  const [fence] = await s.db('geofences').insert({ name: 'dup', latitude: 1, longitude: 2, radius_km: 1 }, ['id']);
  const point = randomUUID();
  const row = (created: string, event = 'enter') => ({
    geofence_id: fence.id,
    device_id: 'd',
    event,
    distance_km: 0.1,
    latitude: 1,
    longitude: 2,
    gps_point_id: point,
    occurred_at: new Date('2026-01-01T00:00:00Z'),
    created_at: new Date(created),
  });
  // As an earlier release could leave them: no unique index yet, the same event written twice.
  await down(s.db);
  await s.db('geofence_events').insert([
    row('2026-01-01T00:00:02Z'),
    row('2026-01-01T00:00:01Z'),
    row('2026-01-01T00:00:03Z'),
    // Events of purged points (no point id) are not duplicates of each other.
    { ...row('2026-01-01T00:00:04Z'), gps_point_id: null },
    { ...row('2026-01-01T00:00:05Z'), gps_point_id: null },
  ]);
  // Outside a transaction, as knex runs it (config.transaction false: the index is built concurrently).
  await up(s.db);
  const left = await s.db('geofence_events').where('geofence_id', fence.id).orderBy('created_at');
  t.deepEqual(
    left.map((r) => [r.gps_point_id, r.created_at.toISOString()]),
    [
      [point, '2026-01-01T00:00:01.000Z'],
      [null, '2026-01-01T00:00:04.000Z'],
      [null, '2026-01-01T00:00:05.000Z'],
    ],
  );
  const again = await s
    .db('geofence_events')
    .insert(row('2026-01-01T00:00:06Z'))
    .catch((err: { code?: string }) => err.code);
  t.is(again, '23505');
});

test.serial('the event identity migration does not hold writes to the table while it waits or runs', async (t) => {
  // A SHARE lock over the clean-up and the index build held every geofence worker and fence
  // deletion for as long as the whole table took (and, queued behind a long transaction, longer).
  const s = stack();
  await down(s.db);
  const [fence] = await s.db('geofences').insert({ name: 'live', latitude: 1, longitude: 2, radius_km: 1 }, ['id']);
  const event = (id: string) => ({
    geofence_id: fence.id,
    device_id: 'd',
    event: 'enter',
    distance_km: 0.1,
    latitude: 1,
    longitude: 2,
    gps_point_id: id,
    occurred_at: new Date(),
  });
  // A worker's transaction still open when the migration starts.
  const open = await s.db.transaction();
  await open('geofence_events').insert(event(randomUUID()));
  const running = up(s.db);
  await new Promise((r) => setTimeout(r, 300));
  // Another write meanwhile: through, not queued behind the migration's lock. A lock the migration
  // held while it waits for the open transaction would hold this write until that commits, which
  // happens only after it: the write would wait out any lock_timeout. 5 s, not 1: on a loaded CI
  // host the write once waited over a second for a lock the migration holds only briefly.
  const written = await s.db
    .transaction(async (trx) => {
      await trx.raw(`SET LOCAL lock_timeout = '5s'`);
      await trx('geofence_events').insert(event(randomUUID()));
      return 'written';
    })
    .catch((err: { code?: string }) => err.code);
  await open.commit();
  await running;
  t.is(written, 'written');
  const idx = await s.db.raw(
    `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'geofence_events_point_unique'`,
  );
  t.deepEqual(idx.rows, [{ indisvalid: true }]);
});
