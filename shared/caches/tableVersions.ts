import DataLoader from 'dataloader';
import type { Knex } from 'knex';

/**
 * Version reads of one process and database, batched: the reads asked for while one turn of the
 * event loop handles incoming requests share one statement (as the row loader does), so N
 * concurrent cached answers cost one indexed read, not N. Nothing is kept between batches: each
 * request's versions are read after it arrived, so a write committed before it is always seen.
 */
/**
 * The tables whose statement-level trigger bumps their `table_versions` row (migrations
 * 20261124000100_table_versions, 20261124080000_more_table_versions, 20261125000000_list_versions).
 * A test checks each has its trigger. Tables written on every request of a hot path (gps_points,
 * sessions, api_keys, audit_events) stay out: each writing statement also bumps a version row, and
 * a cached answer of a table that changes all the time is rebuilt all the time.
 */
export const VERSIONED_TABLES = [
  'trip_templates',
  'trip_categories',
  'roles',
  'role_permissions',
  'permissions',
  'geofences',
  'settings',
  'platforms',
  'trips',
  'trip_status_history',
  'devices',
  'locations',
  'oauth_clients',
  'system_config',
  'users',
] as const;
export type VersionedTable = (typeof VERSIONED_TABLES)[number];

const loaders = new WeakMap<Knex, DataLoader<string, string>>();

function loaderFor(db: Knex): DataLoader<string, string> {
  let loader = loaders.get(db);
  if (!loader) {
    loader = new DataLoader<string, string>(
      async (tables) => {
        // A table's version is the sum of its shards (migration 20261125000000_list_versions).
        // Plain SQL: the query builder cost more per batch than the statement's round trip.
        const { rows } = await db.raw<{ rows: Array<{ table_name: string; version: string }> }>(
          'SELECT table_name, sum(version) AS version FROM table_versions WHERE table_name = ANY(?) GROUP BY table_name',
          [tables as string[]],
        );
        const byName = new Map(rows.map((r) => [r.table_name, String(r.version)]));
        return tables.map((t) => byName.get(t) ?? '0');
      },
      { cache: false, batchScheduleFn: (run) => setImmediate(run) },
    );
    loaders.set(db, loader);
  }
  return loader;
}

/**
 * The versions of reference tables (kept by triggers, migrations 20261124000100_table_versions and
 * 20261124080000_more_table_versions), as one tag: `trip_templates:12`. Equal tags mean no write
 * committed to those tables in between.
 */
export async function tableVersionTag(db: Knex, tables: readonly string[]): Promise<string> {
  const loader = loaderFor(db);
  const versions = await Promise.all(tables.map((t) => loader.load(t)));
  return tables.map((t, i) => `${t}:${versions[i]}`).join(',');
}
