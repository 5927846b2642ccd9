import type { Knex } from 'knex';
import { createKeyedCounter, dropKeyedCounter } from './20261128000100_static_keyed_counts';

/**
 * A keyed row counter (migration 20261126000000_keyed_row_counters) of GPS points per device
 * identifier, `gps_points_by_device:<device_id>`, so GET /v1/gps?device_id= reads its exact total
 * from the counter instead of counting the device's points on every page (a Parallel Index Only
 * Scan of 200,000 entries, about 50 ms, for a device with 200,000 points), and its deep pages are
 * read from the end like an unfiltered list's (api/pagination.ts readPageFromEnd).
 *
 * Kept like the other keyed counters: a statement-level trigger adds each statement's delta per
 * device from its transition tables, devices in order, in a trigger function of its own with the
 * column in static SQL (migration 20261128000100_static_keyed_counts). GPS ingestion writes one
 * multi-row INSERT per group commit or batch (shared/commands/gpsInsert.ts), so the price is one
 * counter row upsert per distinct device per statement, not per point. Also in
 * shared/queries/counters.ts (KEYED_ROW_COUNTERS).
 */
const NAME = 'gps_points_by_device';
const TABLE = 'gps_points';

export async function up(knex: Knex): Promise<void> {
  await createKeyedCounter(knex, NAME, TABLE, 'device_id');
}

export async function down(knex: Knex): Promise<void> {
  await dropKeyedCounter(knex, NAME, TABLE);
}
