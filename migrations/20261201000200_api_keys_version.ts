import type { Knex } from 'knex';

/**
 * A version row for `api_keys` (migration 20261124000100_table_versions, sharded by
 * 20261125000000_list_versions), so GET /v1/api-keys is answered from the version-checked response
 * cache. Requests made with a key do not write the table: their `last_used_at` stamps are batched
 * by each api process and written by one statement every 15 seconds (CredentialResolver), so the
 * version moves with those flushes and real changes, not with traffic.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    'CREATE TRIGGER api_keys_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_keys FOR EACH STATEMENT EXECUTE FUNCTION bump_table_version()',
  );
  await knex.raw("INSERT INTO table_versions (table_name, version) VALUES ('api_keys', 1) ON CONFLICT DO NOTHING");
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER IF EXISTS api_keys_version ON api_keys');
  await knex('table_versions').where('table_name', 'api_keys').delete();
}
