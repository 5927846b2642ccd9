import type { Knex } from 'knex';
import { addVersionTriggers, dropVersionTriggers } from './20261124080000_more_table_versions';

/**
 * A version row for `api_keys` (migration 20261124000100_table_versions, sharded by
 * 20261125000000_list_versions), so GET /v1/api-keys is answered from the version-checked response
 * cache. Requests made with a key do not write the table: their `last_used_at` stamps are batched
 * by each api process and written by one statement every 15 seconds (CredentialResolver), so the
 * version moves with those flushes and real changes, not with traffic.
 */
export async function up(knex: Knex): Promise<void> {
  await addVersionTriggers(knex, ['api_keys']);
}

export async function down(knex: Knex): Promise<void> {
  await dropVersionTriggers(knex, ['api_keys']);
}
