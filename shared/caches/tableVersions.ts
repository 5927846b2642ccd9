import type DataLoader from 'dataloader';
import type { Knex } from 'knex';
import { coalesced, turnBatcherByDb, turnLoader } from '../rowLoader';

/**
 * Version reads of one process and database, batched: the reads asked for while one turn of the
 * event loop handles incoming requests share one statement (as the row loader does), so N
 * concurrent cached answers cost one indexed read, not N. Nothing is kept between batches: each
 * request's versions are read after it arrived, so a write committed before it is always seen.
 */
/**
 * The tables whose statement-level trigger bumps their `table_versions` row (migrations
 * 20261124000100_table_versions, 20261124080000_more_table_versions, 20261125000000_list_versions,
 * 20261201000200_api_keys_version, 20261201000300_chat_versions, 20261202000000_gps_points_version,
 * 20261212000000_location_contacts_version).
 * A test checks each has its trigger. Tables written by one statement per request of a hot path
 * (sessions, audit_events) stay out: each writing statement also bumps a version row, and a cached
 * answer of a table that changes all the time is rebuilt all the time. gps_points is in: its points
 * are written by one INSERT per group commit (a version bump per commit, not per point), and the
 * one answer cached on it (the latest point of every device) is a read over every device, worth
 * keeping while no point arrives. api_keys is in: a request made with a key writes nothing there
 * (its last-used stamp waits for the 15-second batched flush).
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
  'location_contacts',
  'oauth_clients',
  'system_config',
  'users',
  'api_keys',
  'chat_guilds',
  'chat_members',
  'gps_points',
] as const;
export type VersionedTable = (typeof VERSIONED_TABLES)[number];

const loaders = new WeakMap<Knex, DataLoader<string, string>>();

function loaderFor(db: Knex): DataLoader<string, string> {
  let loader = loaders.get(db);
  if (!loader) {
    loader = turnLoader<string>(async (tables) => {
      // A table's version is the sum of its shards (migration 20261125000000_list_versions).
      // Plain SQL: the query builder cost more per batch than the statement's round trip.
      const { rows } = await db.raw<{ rows: Array<{ table_name: string; version: string }> }>(
        'SELECT table_name, sum(version) AS version FROM table_versions WHERE table_name = ANY(?) GROUP BY table_name',
        [tables],
      );
      const byName = new Map(rows.map((r) => [r.table_name, String(r.version)]));
      return tables.map((t) => byName.get(t) ?? '0');
    });
    loaders.set(db, loader);
  }
  return loader;
}

/**
 * The versions of reference tables (kept by triggers, migrations 20261124000100_table_versions and
 * 20261124080000_more_table_versions), as one tag: `trip_templates:12`. Equal tags mean no write
 * committed to those tables in between.
 */
export function tableVersionTag(db: Knex, tables: readonly string[]): Promise<string> {
  return versionTag(db, tables, {});
}

/**
 * Versions kept per key, for answers that depend on the rows of one parent (a trip's track) in a
 * table written on every request of a hot path, where a whole-table version would change all the
 * time. Each names the statement reading the current versions of a batch of keys (bound as one
 * array of `type`) as rows of `key` and `version`. A key without a row has version 0: its version
 * must never go back to 0, or to any value it had before, while the key can be read again.
 * - trip_track: trip_track_stats.version, bumped in the same transaction by the statement trigger of
 *   every insert, update and delete of the trip's points (migration 20261129000000_trip_track_stats;
 *   TRUNCATE bumps every row, migration 20261201000000_trip_track_truncate_bumps). A trip without a
 *   row has no points; deleting the trip deletes its row, and its id is never used again.
 */
export const KEYED_VERSIONS = {
  trip_track: {
    type: 'uuid',
    sql: 'SELECT trip_id::text AS key, version::text AS version FROM trip_track_stats WHERE trip_id = ANY(?::uuid[])',
  },
} as const;
export type KeyedVersion = keyof typeof KEYED_VERSIONS;

/** The keyed version `keyed` of the key in path parameter `param` (a route's `cacheBy`). */
export interface KeyedVersionRef {
  keyed: KeyedVersion;
  param: string;
}

/** `cacheBy` entry: the trip's track of the trip whose id is path parameter `param`. */
export const tripTrackOf = (param: string): KeyedVersionRef => ({ keyed: 'trip_track', param });

const keyedReaders = Object.fromEntries(
  Object.entries(KEYED_VERSIONS).map(([name, v]) => [
    name,
    turnBatcherByDb<string>(async (db, keys) => {
      const { rows } = await db.raw<{ rows: Array<{ key: string; version: string }> }>(v.sql, [keys]);
      return new Map(rows.map((r) => [r.key, r.version]));
    }),
  ]),
) as Record<KeyedVersion, (db: Knex, key: string) => Promise<string | undefined>>;

/** The current version of `key` in `name` (0 when it has none yet). */
export async function keyedVersion(db: Knex, name: KeyedVersion, key: string): Promise<string> {
  // uuids come back in lower case; any other key type is compared as sent.
  const k = KEYED_VERSIONS[name].type === 'uuid' ? key.toLowerCase() : key;
  return (await keyedReaders[name](db, k)) ?? '0';
}

/**
 * The tag of tables' versions and keyed versions (keys from `params`), read in the same turn's
 * batches: `trips:12,trip_track:<id>:7`. Equal tags mean no write committed to any of them in
 * between.
 */
export async function versionTag(
  db: Knex,
  sources: ReadonlyArray<string | KeyedVersionRef>,
  params: Record<string, unknown>,
): Promise<string> {
  const parts = await Promise.all(
    sources.map(async (s) => {
      if (typeof s === 'string') return `${s}:${await loaderFor(db).load(s)}`;
      const key = String(params[s.param]);
      return `${s.keyed}:${key}:${await keyedVersion(db, s.keyed, key)}`;
    }),
  );
  return parts.join(',');
}

/**
 * A value computed from whole tables (a GraphQL list of every role, the category tree), kept per
 * process and database while the tables' versions are unchanged: a repeat costs one batched
 * version read, not a read and presentation of every row. Every request reads the versions after
 * it arrived, so a write committed before it is always seen (on every instance). Builds of one
 * database run one at a time (`coalesced`) and read the tag again before their rows, so the value
 * kept is at least as new as the tag it is kept under. The value is shared by every caller: it must
 * not be changed, and may hold only what any caller allowed to read the tables may see.
 */
export function versionedValue<V>(
  tables: readonly VersionedTable[],
): (db: Knex, compute: () => Promise<V>) => Promise<V> {
  const kept = new WeakMap<Knex, { tag: string; value: V }>();
  const builds = coalesced<{ tag: string; value: V }>();
  return async (db, compute) => {
    const tag = await tableVersionTag(db, tables);
    const hit = kept.get(db);
    if (hit?.tag === tag) return hit.value;
    const built = await builds(db, '*', async () => {
      const builtTag = await tableVersionTag(db, tables);
      const entry = { tag: builtTag, value: await compute() };
      kept.set(db, entry);
      return entry;
    });
    return built.value;
  };
}
