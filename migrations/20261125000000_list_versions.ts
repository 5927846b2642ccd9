import type { Knex } from 'knex';

/**
 * Version rows (migration 20261124000100_table_versions) for the tables whose lists are answered
 * from the version-checked response cache (`cacheBy` in api/routing.ts): trips and their status
 * history, devices, locations, OAuth clients, system config and users.
 *
 * These are written more often than the reference tables (users at every sign-in), and a writer holds its version row
 * until it commits, so the versions are now sharded the way row_counters are: a statement bumps
 * one of 16 rows picked by its backend's pid, and a table's version is the sum of its shards.
 * The sum only grows, so any committed write changes it; concurrent writers rarely wait.
 */
const TABLES = ['trips', 'trip_status_history', 'devices', 'locations', 'oauth_clients', 'system_config', 'users'];
const SHARDS = 16;

export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE table_versions ADD COLUMN shard smallint NOT NULL DEFAULT 0');
  await knex.raw('ALTER TABLE table_versions DROP CONSTRAINT table_versions_pkey');
  await knex.raw('ALTER TABLE table_versions ADD PRIMARY KEY (table_name, shard)');
  await knex.raw(`
    CREATE OR REPLACE FUNCTION bump_table_version() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO table_versions (table_name, shard, version) VALUES (TG_TABLE_NAME, pg_backend_pid() % ${SHARDS}, 1)
      ON CONFLICT (table_name, shard) DO UPDATE SET version = table_versions.version + 1;
      RETURN NULL;
    END $$`);
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
  // Back to one row per table, keeping each table's sum.
  await knex.raw(`
    CREATE TEMP TABLE table_versions_sum ON COMMIT DROP AS
      SELECT table_name, sum(version)::bigint AS version FROM table_versions GROUP BY table_name`);
  await knex.raw('DELETE FROM table_versions');
  await knex.raw('ALTER TABLE table_versions DROP CONSTRAINT table_versions_pkey');
  await knex.raw('ALTER TABLE table_versions DROP COLUMN shard');
  await knex.raw('ALTER TABLE table_versions ADD PRIMARY KEY (table_name)');
  await knex.raw('INSERT INTO table_versions (table_name, version) SELECT table_name, version FROM table_versions_sum');
  await knex.raw(`
    CREATE OR REPLACE FUNCTION bump_table_version() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO table_versions (table_name, version) VALUES (TG_TABLE_NAME, 1)
      ON CONFLICT (table_name) DO UPDATE SET version = table_versions.version + 1;
      RETURN NULL;
    END $$`);
}
