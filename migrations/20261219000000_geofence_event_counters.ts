import type { Knex } from 'knex';
import { createKeyedCounter, dropKeyedCounter } from './20261128000100_static_keyed_counts';

/**
 * Keyed row counters (migration 20261126000000_keyed_row_counters) of geofence events per geofence
 * (`geofence_events_by_fence:<geofence_id>`) and per device identifier
 * (`geofence_events_by_device:<device_id>`), so GET /v1/geofences/{id}/events and GET
 * /v1/devices/{id}/geofence-events read their exact totals from a counter instead of counting the
 * fence's or device's events on every page (an index scan of 100,000 entries, 40-100 ms, on page 1
 * too), and their deep pages are read from the end (shared/rowLoader.ts pagesOf).
 *
 * Kept like the other keyed counters, by statement-level triggers: the geofence worker writes a
 * round's events in one INSERT, so the price is one counter row upsert per distinct fence and device
 * per statement. Also in shared/queries/counters.ts (KEYED_ROW_COUNTERS).
 */
const COUNTERS = [
  { name: 'geofence_events_by_fence', column: 'geofence_id' },
  { name: 'geofence_events_by_device', column: 'device_id' },
];
const TABLE = 'geofence_events';

export async function up(knex: Knex): Promise<void> {
  for (const { name, column } of COUNTERS) await createKeyedCounter(knex, name, TABLE, column);
}

export async function down(knex: Knex): Promise<void> {
  for (const { name } of [...COUNTERS].reverse()) await dropKeyedCounter(knex, name, TABLE);
}
