import type { Knex } from 'knex';

/**
 * A trip's distance and duration (GET /v1/trips/{id}, its GPX export and GraphQL) are kept in
 * trip_track_stats instead of being computed from every point of the track on each read: the
 * haversine window costs about 90 µs of PostgreSQL per 100 points, so a read of a long trip grew
 * with its track (a day at one point per second is 86,400 legs per request).
 *
 * How the stored figures stay right (shared/queries/gpsPoints.ts tripStats):
 * - Every statement that inserts, updates or deletes points bumps `version` of each trip it
 *   touched (a statement trigger over its transition table, in trip order so two writers never
 *   wait on each other crosswise). The bump commits with the points, so a snapshot that sees a
 *   version sees exactly the points written up to it.
 * - A read takes the stored figures when `stats_version = version`. Otherwise it computes them in
 *   the same statement, from the same snapshot as the version it read, and stores them only if
 *   the row still holds that version (a row a writer holds is skipped, never waited for).
 * - A trip without a row has no points: 0 km, 0 s. Deleting a trip deletes its row (cascade); the
 *   points it leaves behind (trip_id set to NULL) touch no trip.
 */
const FUNCTION = 'trip_track_touch';

/**
 * Bumps the version of every existing trip named by the rows of `source` (a transition table).
 * Also the `down` of migration 20261130000000_trip_point_counts.
 */
export const touch = (source: string, checkTrip: boolean) => `
        INSERT INTO trip_track_stats (trip_id)
          SELECT DISTINCT r.trip_id FROM (${source}) r
           WHERE r.trip_id IS NOT NULL${checkTrip ? ' AND EXISTS (SELECT 1 FROM trips WHERE trips.id = r.trip_id)' : ''}
           ORDER BY r.trip_id
        ON CONFLICT (trip_id) DO UPDATE SET version = trip_track_stats.version + 1;`;

const TRIGGERS = [
  { suffix: 'ins', on: 'INSERT', referencing: 'REFERENCING NEW TABLE AS new_rows' },
  { suffix: 'del', on: 'DELETE', referencing: 'REFERENCING OLD TABLE AS old_rows' },
  { suffix: 'upd', on: 'UPDATE', referencing: 'REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows' },
];

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE trip_track_stats (
      trip_id uuid PRIMARY KEY REFERENCES trips (id) ON DELETE CASCADE,
      version bigint NOT NULL DEFAULT 1,
      stats_version bigint,
      distance_km double precision,
      duration_seconds double precision
    )`);
  // Inserted points name trips their foreign key has just checked; updates and deletes may run
  // inside the deletion of the trip itself (ON DELETE SET NULL), whose row is then gone.
  await knex.raw(`
    CREATE FUNCTION ${FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN ${touch('SELECT trip_id FROM new_rows', false)}
      ELSIF TG_OP = 'DELETE' THEN ${touch('SELECT trip_id FROM old_rows', true)}
      ELSIF TG_OP = 'UPDATE' THEN ${touch('SELECT trip_id FROM old_rows UNION ALL SELECT trip_id FROM new_rows', true)}
      ELSE DELETE FROM trip_track_stats;
      END IF;
      RETURN NULL;
    END $$`);
  for (const t of TRIGGERS) {
    await knex.raw(
      `CREATE TRIGGER gps_points_track_${t.suffix} AFTER ${t.on} ON gps_points ${t.referencing} FOR EACH STATEMENT EXECUTE FUNCTION ${FUNCTION}()`,
    );
  }
  await knex.raw(
    `CREATE TRIGGER gps_points_track_trunc AFTER TRUNCATE ON gps_points FOR EACH STATEMENT EXECUTE FUNCTION ${FUNCTION}()`,
  );
  // Trips that already have points: figures computed on their first read. The triggers above hold
  // GPS writes until this transaction ends, so the trips are found by a skip scan over the track
  // index (one probe per trip) rather than a pass over every point: 209 against 523 ms at
  // 1,000,000 points in 10,000 trips, and it does not grow with the points.
  await knex.raw(
    `WITH RECURSIVE t AS (
       (SELECT trip_id FROM gps_points WHERE trip_id IS NOT NULL ORDER BY trip_id LIMIT 1)
       UNION ALL
       SELECT (SELECT g.trip_id FROM gps_points g WHERE g.trip_id > t.trip_id ORDER BY g.trip_id LIMIT 1)
         FROM t WHERE t.trip_id IS NOT NULL
     )
     INSERT INTO trip_track_stats (trip_id)
       SELECT t.trip_id FROM t WHERE t.trip_id IS NOT NULL AND EXISTS (SELECT 1 FROM trips WHERE trips.id = t.trip_id)`,
  );
}

export async function down(knex: Knex): Promise<void> {
  for (const suffix of [...TRIGGERS.map((t) => t.suffix), 'trunc']) {
    await knex.raw(`DROP TRIGGER IF EXISTS gps_points_track_${suffix} ON gps_points`);
  }
  await knex.raw(`DROP FUNCTION IF EXISTS ${FUNCTION}()`);
  await knex.raw('DROP TABLE IF EXISTS trip_track_stats');
}
