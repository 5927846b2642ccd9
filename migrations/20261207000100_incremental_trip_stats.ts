import type { Knex } from 'knex';
import { functionSql, touch } from './20261130000000_trip_point_counts';
import { BUMP_ALL } from './20261201000000_trip_track_truncate_bumps';

/**
 * A trip's stored distance and duration (migration 20261129000000_trip_track_stats) are brought up
 * to date by adding the new legs when the only change since they were stored is points appended
 * after the last point they counted, in track order ("timestamp", created_at, id). Before, every
 * read after a new point summed the haversine window over the whole track again: 97–180 ms for a
 * trip of 100,000 points, on nearly every read of an active trip.
 *
 * What is stored beside the figures (written by the read that stores them, shared/queries/
 * gpsPoints.ts tripStats): the running distance, the first point's timestamp, and the last
 * counted point's position in the track (timestamp, created_at, id) and coordinates.
 *
 * `appends_only` says whether that is still enough. The read that stores figures sets it; the
 * trigger that bumps the trip's version clears it for every write that is not an append after the
 * last counted point: a delete, an update, a TRUNCATE, or an insert whose earliest (timestamp,
 * created_at) is not past the stored last point's. (Componentwise minimums of the statement's
 * points: when they are past the last point, so is every point; a tie on both is taken as out of
 * order.) The comparison is made in the upsert's DO UPDATE, on the row as it is when the writer
 * holds it, so a read that stored newer figures meanwhile is compared against. On the first write
 * of a trip (a new row) the statement's minimums land in last_ts/last_created_at; they mean
 * nothing there, as appends_only is false until a read stores figures.
 */
const FUNCTION = 'trip_track_touch';

const COLUMNS = [
  'appends_only boolean NOT NULL DEFAULT false',
  'first_ts timestamptz',
  'last_ts timestamptz',
  'last_created_at timestamptz',
  'last_id uuid',
  'last_lat double precision',
  'last_lon double precision',
];

/** Bumps the version and moves the point count of the trips of `source` (trip_id, d); not an append. */
const rewrite = (source: string) => `
        INSERT INTO trip_track_stats (trip_id, points)
          SELECT r.trip_id, sum(r.d)::bigint FROM (${source}) r
           WHERE r.trip_id IS NOT NULL AND EXISTS (SELECT 1 FROM trips WHERE trips.id = r.trip_id)
           GROUP BY r.trip_id ORDER BY r.trip_id
        ON CONFLICT (trip_id) DO UPDATE
          SET version = trip_track_stats.version + 1, points = trip_track_stats.points + EXCLUDED.points,
              appends_only = false;`;

/**
 * Inserted points: as `rewrite`, and the trip stays appends_only only if the statement's points
 * all come after the stored last point (EXCLUDED.last_ts/last_created_at carry their minimums).
 */
const APPEND = `
        INSERT INTO trip_track_stats (trip_id, points, last_ts, last_created_at)
          SELECT r.trip_id, count(*), min(r."timestamp"), min(r.created_at) FROM new_rows r
           WHERE r.trip_id IS NOT NULL
           GROUP BY r.trip_id ORDER BY r.trip_id
        ON CONFLICT (trip_id) DO UPDATE
          SET version = trip_track_stats.version + 1, points = trip_track_stats.points + EXCLUDED.points,
              appends_only = trip_track_stats.appends_only AND COALESCE(
                (EXCLUDED.last_ts, EXCLUDED.last_created_at) > (trip_track_stats.last_ts, trip_track_stats.last_created_at),
                false);`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE trip_track_stats ${COLUMNS.map((c) => `ADD COLUMN ${c}`).join(', ')}`);
  await knex.raw(`
    CREATE OR REPLACE FUNCTION ${FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN ${APPEND}
      ELSIF TG_OP = 'DELETE' THEN ${rewrite('SELECT trip_id, -1::bigint AS d FROM old_rows')}
      ELSIF TG_OP = 'UPDATE' THEN ${rewrite('SELECT trip_id, -1::bigint AS d FROM old_rows UNION ALL SELECT trip_id, 1 FROM new_rows')}
      ELSE UPDATE trip_track_stats SET version = version + 1, points = 0, appends_only = false;
      END IF;
      RETURN NULL;
    END $$`);
}

export async function down(knex: Knex): Promise<void> {
  // Back to the function of migration 20261201000000_trip_track_truncate_bumps.
  await knex.raw(functionSql(touch, true, BUMP_ALL));
  await knex.raw(
    `ALTER TABLE trip_track_stats ${COLUMNS.map((c) => `DROP COLUMN IF EXISTS ${c.split(' ')[0]}`).join(', ')}`,
  );
}
