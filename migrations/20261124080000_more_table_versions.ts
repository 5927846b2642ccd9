import type { Knex } from 'knex';

/**
 * More tables get a version row (migration 20261124000100_table_versions): `geofences`, whose
 * version tells a worker whether its spatial index of the active fences is current with one
 * indexed read instead of an aggregate over every fence per job, and `settings` and `platforms`,
 * whose answers are cached by version like the other reference tables (api/responseCache.ts).
 */
const TABLES = ['geofences', 'settings', 'platforms'];

/** Gives each table the statement trigger that bumps its version, and its first version row. */
export async function addVersionTriggers(knex: Knex, tables: readonly string[]): Promise<void> {
  for (const t of tables) {
    await knex.raw(
      `CREATE TRIGGER ${t}_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${t} FOR EACH STATEMENT EXECUTE FUNCTION bump_table_version()`,
    );
    await knex.raw('INSERT INTO table_versions (table_name, version) VALUES (?, 1) ON CONFLICT DO NOTHING', [t]);
  }
}

/** Drops what `addVersionTriggers` added. */
export async function dropVersionTriggers(knex: Knex, tables: readonly string[]): Promise<void> {
  for (const t of tables) {
    await knex.raw(`DROP TRIGGER IF EXISTS ${t}_version ON ${t}`);
    await knex('table_versions').where('table_name', t).delete();
  }
}

export async function up(knex: Knex): Promise<void> {
  await addVersionTriggers(knex, TABLES);
}

export async function down(knex: Knex): Promise<void> {
  await dropVersionTriggers(knex, TABLES);
}
