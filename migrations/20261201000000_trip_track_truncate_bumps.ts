import type { Knex } from 'knex';
import { functionSql, touch } from './20261130000000_trip_point_counts';

/**
 * TRUNCATE of gps_points bumps the version of every trip's track (and zeroes its point count)
 * instead of deleting the trips' trip_track_stats rows.
 *
 * A trip's track version is what cached answers of the trip's points are checked against
 * (api/responseCache.ts, keyed version `trip_track`): a version must never come back for the same
 * trip, or an answer cached before would be taken as current. A deleted row started again at 1 on
 * the trip's next point, so after a TRUNCATE a trip could reach a version it had before with other
 * points. Keeping the rows keeps each trip's versions increasing for as long as the trip exists;
 * deleting the trip still deletes its row (its id is never used again). The stored distance and
 * duration are recomputed on the next read, as after any write (stats_version no longer matches).
 */
export const BUMP_ALL = 'UPDATE trip_track_stats SET version = version + 1, points = 0;';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(functionSql(touch, true, BUMP_ALL));
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(functionSql(touch, true));
}
