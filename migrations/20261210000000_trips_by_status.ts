import type { Knex } from 'knex';
import { createKeyedCounter, dropKeyedCounter } from './20261128000100_static_keyed_counts';

/**
 * A keyed row counter (migration 20261126000000_keyed_row_counters) of trips per status,
 * `trips_by_status:<status>`, so GET /v1/trips?status= and GraphQL `trips(status:)` read their
 * exact total from the counter instead of counting the matching trips on every page (a count that
 * grows with the table: 23 ms at 200,000 trips), and their deep pages are read from the end.
 *
 * Kept like the other keyed counters: a statement-level trigger adds each statement's delta per
 * status, in a trigger function of its own with the column in static SQL (migration
 * 20261128000100_static_keyed_counts). An update that leaves the status alone adds nothing (zero
 * deltas are skipped). Also in shared/queries/counters.ts (KEYED_ROW_COUNTERS).
 */
const NAME = 'trips_by_status';
const TABLE = 'trips';

export async function up(knex: Knex): Promise<void> {
  await createKeyedCounter(knex, NAME, TABLE, 'status');
}

export async function down(knex: Knex): Promise<void> {
  await dropKeyedCounter(knex, NAME, TABLE);
}
