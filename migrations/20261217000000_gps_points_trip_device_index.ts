import type { Knex } from 'knex';
import { dropInvalid } from './20261128000200_trip_track_covering_index';

/**
 * GET /v1/gps with both `device_id` and `trip_id`: the points of one trip on one device, newest
 * first. With only the device and trip indexes, PostgreSQL combined the two (a BitmapAnd) and
 * sorted every match for each page, and counted every match again for the total: 0.3–2 s per page
 * for a trip of 200,000 to 1,000,000 points. This index holds the trip's points grouped by device
 * in the list's order, so
 * - a page is read straight off it (forward, or backward for a deep page read from the end), and
 * - the total is the trip's stored point count minus its points on other devices or on none,
 *   counted over two ranges of this index on either side of the device (and its NULL entries):
 *   none at all for a trip tracked by one device (shared/queries/counters.ts tripPointsOfDevice).
 * Points without a trip are left out of it, so they pay nothing.
 *
 * Built CONCURRENTLY (outside a transaction), so GPS ingestion goes on while a large table is
 * indexed; a build left invalid by an interrupted run is dropped and started again.
 */
export const config = { transaction: false };

const NAME = 'gps_points_trip_device';

export async function up(knex: Knex): Promise<void> {
  await dropInvalid(knex, NAME);
  await knex.raw(
    `CREATE INDEX CONCURRENTLY IF NOT EXISTS ${NAME}
       ON gps_points (trip_id, device_id, "timestamp" DESC, created_at DESC, id DESC) WHERE trip_id IS NOT NULL`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${NAME}`);
}
