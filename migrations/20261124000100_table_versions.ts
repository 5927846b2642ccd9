import type { Knex } from 'knex';

/**
 * Versions of the reference tables whose whole content a route answers (trip templates and
 * categories, roles, permissions): a statement-level trigger bumps the table's version in the
 * writing transaction, so a process that cached a response can tell with one indexed read whether
 * it is still the table's content (api/responseCache.ts). These tables change rarely; their
 * writers serialise on the version row only among themselves.
 */
const TABLES = ['trip_templates', 'trip_categories', 'roles', 'role_permissions', 'permissions'];

export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE TABLE table_versions (table_name text PRIMARY KEY, version bigint NOT NULL)');
  await knex.raw(`
    CREATE FUNCTION bump_table_version() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO table_versions (table_name, version) VALUES (TG_TABLE_NAME, 1)
      ON CONFLICT (table_name) DO UPDATE SET version = table_versions.version + 1;
      RETURN NULL;
    END $$`);
  for (const t of TABLES) {
    await knex.raw(
      `CREATE TRIGGER ${t}_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${t} FOR EACH STATEMENT EXECUTE FUNCTION bump_table_version()`,
    );
    await knex.raw('INSERT INTO table_versions (table_name, version) VALUES (?, 1)', [t]);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const t of TABLES) await knex.raw(`DROP TRIGGER IF EXISTS ${t}_version ON ${t}`);
  await knex.raw('DROP FUNCTION IF EXISTS bump_table_version()');
  await knex.raw('DROP TABLE IF EXISTS table_versions');
}
