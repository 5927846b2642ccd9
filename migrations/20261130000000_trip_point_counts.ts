import type { Knex } from 'knex';
import { touch as versionsOnly } from './20261129000000_trip_track_stats';

/**
 * A trip's number of points is kept in its trip_track_stats row (migration
 * 20261129000000_trip_track_stats), beside the version the same trigger already bumps: GET
 * /v1/trips/{id}/gps reads its exact `total` there instead of counting the track on every page
 * (a day at one point per second is 86,400 index entries counted per request, and the count grew
 * with the track).
 *
 * The trigger that bumps a trip's version on every statement writing its points now also adds the
 * statement's net change in points, per trip, in the same upsert: no second trigger and no second
 * row write on GPS ingestion. Inserted points add, deleted points subtract, an update that moves
 * points from one trip to another does both (an update within one trip nets to 0 and still bumps
 * the version). TRUNCATE empties the table as before; deleting a trip deletes its row (cascade).
 *
 * Backfill: the table is locked against writes (reads go on) while the function is replaced and
 * the existing points are counted, so no write can land between the count and the new trigger.
 */
const FUNCTION = 'trip_track_touch';

/**
 * The upsert adding `source`'s per-trip deltas (rows of trip_id, d) and bumping each trip's version.
 * Also used by migration 20261201000000_trip_track_truncate_bumps.
 */
export const touch = (source: string, checkTrip: boolean) => `
        INSERT INTO trip_track_stats (trip_id, points)
          SELECT r.trip_id, sum(r.d)::bigint FROM (${source}) r
           WHERE r.trip_id IS NOT NULL${checkTrip ? ' AND EXISTS (SELECT 1 FROM trips WHERE trips.id = r.trip_id)' : ''}
           GROUP BY r.trip_id ORDER BY r.trip_id
        ON CONFLICT (trip_id) DO UPDATE
          SET version = trip_track_stats.version + 1, points = trip_track_stats.points + EXCLUDED.points;`;

/** The trigger function; `onTruncate`: what TRUNCATE does (migration 20261201000000 changes it). */
export const functionSql = (upsert: typeof touch, counted: boolean, onTruncate = 'DELETE FROM trip_track_stats;') => {
  const ins = counted ? 'SELECT trip_id, 1::bigint AS d FROM new_rows' : 'SELECT trip_id FROM new_rows';
  const del = counted ? 'SELECT trip_id, -1::bigint AS d FROM old_rows' : 'SELECT trip_id FROM old_rows';
  const upd = counted
    ? 'SELECT trip_id, -1::bigint AS d FROM old_rows UNION ALL SELECT trip_id, 1 FROM new_rows'
    : 'SELECT trip_id FROM old_rows UNION ALL SELECT trip_id FROM new_rows';
  return `
    CREATE OR REPLACE FUNCTION ${FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN ${upsert(ins, false)}
      ELSIF TG_OP = 'DELETE' THEN ${upsert(del, true)}
      ELSIF TG_OP = 'UPDATE' THEN ${upsert(upd, true)}
      ELSE ${onTruncate}
      END IF;
      RETURN NULL;
    END $$`;
};

export async function up(knex: Knex): Promise<void> {
  await knex.raw('LOCK TABLE gps_points IN SHARE ROW EXCLUSIVE MODE');
  await knex.raw('ALTER TABLE trip_track_stats ADD COLUMN points bigint NOT NULL DEFAULT 0');
  await knex.raw(functionSql(touch, true));
  // Every trip with points has its row (migration 20261129000000_trip_track_stats). One pass over
  // the points (PostgreSQL plans a parallel sequential scan: 375 ms at 1,086,400 points).
  await knex.raw(
    `UPDATE trip_track_stats s SET points = c.n
       FROM (SELECT trip_id, count(*) AS n FROM gps_points WHERE trip_id IS NOT NULL GROUP BY trip_id) c
      WHERE c.trip_id = s.trip_id`,
  );
}

export async function down(knex: Knex): Promise<void> {
  // Back to the function of migration 20261129000000_trip_track_stats (versions only).
  await knex.raw(functionSql(versionsOnly, false));
  await knex.raw('ALTER TABLE trip_track_stats DROP COLUMN IF EXISTS points');
}
