import type { Knex } from 'knex';
import { addVersionTriggers, dropVersionTriggers } from './20261124080000_more_table_versions';

/**
 * A version row for `location_contacts`, so a location with its contacts (GET /v1/locations/{id})
 * is answered from the version-checked response cache like a trip. Contacts are written only by
 * the location commands, never by reads.
 */
const TABLES = ['location_contacts'];

export async function up(knex: Knex): Promise<void> {
  await addVersionTriggers(knex, TABLES);
}

export async function down(knex: Knex): Promise<void> {
  await dropVersionTriggers(knex, TABLES);
}
