import type { Knex } from 'knex';

/**
 * Version rows (migration 20261124000100_table_versions, sharded by 20261125000000_list_versions)
 * for `chat_guilds` and `chat_members`, so a page of a guild's members is answered from the
 * version-checked response cache. Both are written by chat syncs and bot events, not by reads.
 */
const TABLES = ['chat_guilds', 'chat_members'];

export async function up(knex: Knex): Promise<void> {
  for (const t of TABLES) {
    await knex.raw(
      `CREATE TRIGGER ${t}_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${t} FOR EACH STATEMENT EXECUTE FUNCTION bump_table_version()`,
    );
    await knex.raw('INSERT INTO table_versions (table_name, version) VALUES (?, 1) ON CONFLICT DO NOTHING', [t]);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const t of TABLES) {
    await knex.raw(`DROP TRIGGER IF EXISTS ${t}_version ON ${t}`);
    await knex('table_versions').where('table_name', t).delete();
  }
}
