import type { Knex } from 'knex';

/**
 * The versions of reference tables (kept by triggers, migration 20261124000100_table_versions), as
 * one tag: `trip_templates:12`. Equal tags mean no write committed to those tables in between.
 * One indexed read, sent as a named prepared statement.
 */
export async function tableVersionTag(db: Knex, tables: readonly string[]): Promise<string> {
  const rows: Array<{ table_name: string; version: string }> = await db('table_versions')
    .whereRaw('table_name = ANY(?)', [tables as string[]])
    .select('table_name', 'version')
    .options({ name: 'table_versions_read' });
  const byName = new Map(rows.map((r) => [r.table_name, r.version]));
  return tables.map((t) => `${t}:${byName.get(t) ?? 0}`).join(',');
}
