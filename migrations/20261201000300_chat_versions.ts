import type { Knex } from 'knex';
import { addVersionTriggers, dropVersionTriggers } from './20261124080000_more_table_versions';

/**
 * Version rows (migration 20261124000100_table_versions, sharded by 20261125000000_list_versions)
 * for `chat_guilds` and `chat_members`, so a page of a guild's members is answered from the
 * version-checked response cache. Both are written by chat syncs and bot events, not by reads.
 */
const TABLES = ['chat_guilds', 'chat_members'];

export async function up(knex: Knex): Promise<void> {
  await addVersionTriggers(knex, TABLES);
}

export async function down(knex: Knex): Promise<void> {
  await dropVersionTriggers(knex, TABLES);
}
