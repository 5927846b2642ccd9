import test from 'ava';
import { randomUUID } from 'node:crypto';
import { down, up } from '../../migrations/20261216000000_geofence_event_identity';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('the event identity migration keeps the first of duplicate events, then refuses another', async (t) => {
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
  await s.db.transaction((trx) => up(trx));
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
