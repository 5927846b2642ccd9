import type { Knex } from 'knex';
import { PLANNED_PER_VALUES } from '../preparedStatements';

/**
 * Exact row counters maintained by triggers (migration 20261124000000_list_fast_paths): the
 * `total` of a paginated list without a filter is read from here instead of a COUNT over the table.
 * A counter counts the rows of its table that match its predicate; the migration that creates one
 * declares the same table and predicate.
 */
export const ROW_COUNTERS = {
  users_live: { table: 'users', where: 'deleted_at IS NULL' },
  users_all: { table: 'users', where: 'true' },
  devices: { table: 'devices', where: 'true' },
  gps_points: { table: 'gps_points', where: 'true' },
  geofences: { table: 'geofences', where: 'true' },
  locations: { table: 'locations', where: 'true' },
  trips: { table: 'trips', where: 'true' },
  oauth_clients: { table: 'oauth_clients', where: 'true' },
  audit_events: { table: 'audit_events', where: 'true' },
} as const;
export type RowCounter = keyof typeof ROW_COUNTERS;

/**
 * Keyed row counters (migration 20261126000000_keyed_row_counters): the rows of a table per value of
 * one column, each value's count under `<name>:<value>`. pagesOf (shared/rowLoader.ts) reads a
 * parent's exact total from one with its `counter` option. Each has a trigger function of its own
 * with its column in static SQL (migration 20261128000100_static_keyed_counts): a new keyed
 * counter gets one the same way, so its writes are not re-planned on every statement.
 */
export const KEYED_ROW_COUNTERS = {
  audit_events_by_user: { table: 'audit_events', column: 'user_id' },
  chat_members_by_guild: { table: 'chat_members', column: 'guild_id' },
  /** GET /v1/gps?device_id= (migration 20261207000000_gps_points_by_device): the device's exact total. */
  gps_points_by_device: { table: 'gps_points', column: 'device_id' },
  /** GET /v1/trips?status=, GraphQL trips(status:) (migration 20261210000000_trips_by_status). */
  trips_by_status: { table: 'trips', column: 'status' },
  /** GET /v1/geofences/{id}/events and /v1/devices/{id}/geofence-events (migration 20261219000000_geofence_event_counters). */
  geofence_events_by_fence: { table: 'geofence_events', column: 'geofence_id' },
  geofence_events_by_device: { table: 'geofence_events', column: 'device_id' },
} as const;
export type KeyedRowCounter = keyof typeof KEYED_ROW_COUNTERS;

/** One key's value of a keyed row counter: the rows of its table whose column equals `key`. */
export interface KeyedCount {
  keyed: KeyedRowCounter;
  key: string;
}

/** The name of the row_counters rows holding `count`'s value (the triggers write `<name>:<value::text>`). */
export const keyedCounterName = (count: KeyedCount) => `${count.keyed}:${count.key}`;

/** SQL of a scalar subquery reading a keyed counter's value for the key in the SQL expression `key`. */
export const keyedCounterSql = (name: KeyedRowCounter, key: string) =>
  `(SELECT coalesce(sum(n), 0)::bigint FROM row_counters WHERE counter = '${name}:' || ${key})`;

/**
 * Per-parent counts kept in a row the parent already has, by a trigger that already writes that
 * row on every statement touching the counted table: a keyed counter there would be a second
 * trigger and a second row write. `sql(key)` reads the count of the parent whose id is the SQL
 * expression `key` (of the parent column's type). pagesOf's `counter` option reads these as it
 * reads keyed counters.
 * - gps_points_by_trip: trip_track_stats.points (migration 20261130000000_trip_point_counts), kept
 *   by the trigger that bumps the trip's track version; a trip without a row has no points.
 */
export const STORED_COUNTS = {
  gps_points_by_trip: {
    table: 'gps_points',
    column: 'trip_id',
    /** The type of the parent's key, to cast a bound key to. */
    keyType: 'uuid',
    sql: (key: string) => `(SELECT coalesce((SELECT points FROM trip_track_stats WHERE trip_id = ${key}), 0))`,
  },
} as const;
export type StoredCount = keyof typeof STORED_COUNTS;

/** A parent's exact row count without counting: a keyed row counter or a stored count. */
export type ParentCounter = KeyedRowCounter | StoredCount;

/** The table and parent column `name` counts by. */
export function parentCounterOf(name: ParentCounter): { table: string; column: string } {
  return name in STORED_COUNTS ? STORED_COUNTS[name as StoredCount] : KEYED_ROW_COUNTERS[name as KeyedRowCounter];
}

/** SQL of a scalar subquery reading the count of the parent whose id is the SQL expression `key`. */
export function parentCountSql(name: ParentCounter, key: string): string {
  return name in STORED_COUNTS
    ? STORED_COUNTS[name as StoredCount].sql(key)
    : keyedCounterSql(name as KeyedRowCounter, `${key}::text`);
}

/** Counters whose rows one compaction statement looks at, and statements one run sends at most. */
const COMPACT_BATCH = 10_000;
const COMPACT_MAX_BATCHES = 20;

/**
 * Deletes counter rows that together count nothing. The triggers add each statement's delta to the
 * row of their backend's shard, so a key whose rows are all gone (a device identifier, a user, a
 * guild) keeps up to 16 rows summing to 0, and nothing else removed them: the table grew with every
 * key ever counted (outside soak audit: 13 to 4,669 rows in 30 minutes; POST /v1/gps takes any
 * device identifier).
 *
 * Only rows this statement could lock without waiting are looked at (SKIP LOCKED: a trigger in
 * flight is never waited for, so no lock cycle with one), and of those, the rows of a key are
 * deleted only when their values, read under the lock, sum to 0. Deleting rows that sum to 0 leaves
 * every total as it was, whatever other rows the key has or gets meanwhile: a trigger that waited
 * for a deleted row inserts it again with its delta. Answers the rows deleted.
 */
export async function compactRowCounters(db: Knex): Promise<{ deleted: number }> {
  let deleted = 0;
  for (let i = 0; i < COMPACT_MAX_BATCHES; i++) {
    const { rowCount } = await db.raw(
      `WITH zero AS (
         SELECT counter FROM row_counters GROUP BY counter HAVING sum(n) = 0 LIMIT ?::int
       ), locked AS (
         SELECT counter, shard, n FROM row_counters WHERE counter IN (SELECT counter FROM zero)
          FOR UPDATE SKIP LOCKED
       ), still AS (
         SELECT counter FROM locked GROUP BY counter HAVING sum(n) = 0
       )
       DELETE FROM row_counters r USING locked l
        WHERE r.counter = l.counter AND r.shard = l.shard AND l.counter IN (SELECT counter FROM still)`,
      [COMPACT_BATCH],
    );
    deleted += rowCount ?? 0;
    // Nothing deleted: no key summing to 0 is left but those locked now (the next run takes them).
    if ((rowCount ?? 0) === 0) break;
  }
  return { deleted };
}

/** A scalar subquery that reads an exact total without counting every row it counts, with its bindings. */
export interface TotalRead {
  sql: string;
  bindings: string[];
}

/**
 * Points off the device counted at most (see tripPointsOfDevice): past this the device's own
 * points in the trip are counted instead.
 */
export const OFF_DEVICE_COUNTED = 10_000;

/**
 * The exact number of a trip's points on one device (GET /v1/gps?device_id=&trip_id=), read in
 * one snapshot: the trip's stored count (gps_points_by_trip) minus its points on other devices or
 * on none, counted over the trip-and-device index (migration 20261217000000_gps_points_trip_device_index)
 * in the ranges below and above the device and its NULL entries, and stopped after
 * OFF_DEVICE_COUNTED. A trip tracked by one device has none, so the total costs a few index pages
 * however long the trip is. A trip may hold points of several devices (a point names its trip and
 * device itself); when more than OFF_DEVICE_COUNTED of its points are off the device, the device's
 * points in the trip are counted instead (an index-only range of that index).
 */
export function tripPointsOfDevice(tripId: string, deviceId: string): TotalRead {
  const trip = '?::uuid';
  const off = (cond: string) => `(SELECT 1 FROM gps_points WHERE trip_id = ${trip} AND ${cond})`;
  return {
    sql: `(SELECT CASE WHEN o.n <= ${OFF_DEVICE_COUNTED}
                       THEN ${STORED_COUNTS.gps_points_by_trip.sql(trip)} - o.n
                       ELSE (SELECT count(*) FROM gps_points WHERE trip_id = ${trip} AND device_id = ?) END
             FROM (SELECT count(*) AS n FROM (${off('device_id < ?')} UNION ALL ${off('device_id > ?')}
                                               UNION ALL ${off('device_id IS NULL')}
                                               LIMIT ${OFF_DEVICE_COUNTED + 1}) off_device) o)`,
    bindings: [tripId, tripId, deviceId, tripId, deviceId, tripId, deviceId, tripId],
  };
}

/** The counter of every row of `table`, if there is one. */
export function wholeTableCounter(table: string): RowCounter | undefined {
  for (const [name, c] of Object.entries(ROW_COUNTERS))
    if (c.table === table && c.where === 'true') return name as RowCounter;
  return undefined;
}

/** SQL of a scalar subquery reading a counter (bind the counter's name). */
export const COUNTER_SQL = '(SELECT coalesce(sum(n), 0)::bigint FROM row_counters WHERE counter = ?)';

/** The counter's value now. */
export async function readCounter(db: Knex, name: RowCounter): Promise<number> {
  const { rows } = await db.raw<{ rows: Array<{ n: string }> }>(`SELECT ${COUNTER_SQL} AS n`, [name]);
  return Number(rows[0].n);
}

/**
 * The planner's row estimate of a query (EXPLAIN, no execution): the total of a filtered list past
 * its count cap (the audit log's, a guild's member search), where counting every match would cost
 * more than the page.
 */
export async function estimateRows(db: Knex, q: Knex.QueryBuilder): Promise<number> {
  const { sql, bindings } = q.clone().select(db.raw('1')).toSQL();
  const { rows } = await db.raw<{ rows: Array<{ 'QUERY PLAN': Array<{ Plan: { 'Plan Rows': number } }> }> }>(
    `EXPLAIN (FORMAT JSON) ${sql}`,
    bindings as Knex.RawBinding[],
  );
  return Math.round(rows[0]!['QUERY PLAN'][0]!.Plan['Plan Rows']);
}

/** Column alias of the capped count read in a page's own statement (readCappedPage). */
export const CAPPED_TOTAL = '__capped_total';

/** A page of a filtered list whose total is counted up to a cap, then estimated (readCappedPage). */
export interface CappedPage {
  /** The page's rows, as read (the CAPPED_TOTAL column still on them: callers drop it). */
  rows: ReadonlyArray<Readonly<Record<string, unknown>>>;
  /** The matches: exact, unless `estimated`. Never contradicts the page (see cappedTotal). */
  total: number;
  /** The total is the planner's estimate: more than the cap matched and this page does not end the list. */
  estimated: boolean;
  /** Whether matches lie beyond this page: exact (read one row past the page), whatever the total. */
  hasMore: boolean;
}

/**
 * A filtered list's total from what one page's read proves: `counted`, the matches counted up to
 * `cap` + 1 in the page's own statement, and the page's `rows` at `offset` with `hasMore` (one row
 * read past the page). Up to the cap the count is exact. Beyond it, a page that ends the list (rows,
 * none after them) gives the exact total `offset + rows`; any other page takes the planner's
 * `estimate()`, kept within what the read proves: above the cap and past this page when more
 * follow, no more than the offset past the end. So `next` links and `total_pages` built from the
 * total agree with the rows: an estimate below the real count never hides the pages after it, one
 * above it never leads past the last.
 */
export async function cappedTotal(
  read: { counted: number; cap: number; offset: number; rows: number; hasMore: boolean },
  estimate: () => Promise<number>,
): Promise<{ total: number; estimated: boolean }> {
  const { counted, cap, offset, rows, hasMore } = read;
  if (counted <= cap) return { total: counted, estimated: false };
  if (rows > 0 && !hasMore) return { total: offset + rows, estimated: false };
  const guess = Math.max(cap + 1, await estimate());
  return { total: rows > 0 ? Math.max(guess, offset + rows + 1) : Math.min(offset, guess), estimated: true };
}

/**
 * One page of a filtered list and its total, the rule every list with a capped count follows (the
 * audit log's filtered pages, a guild's member search). `matching()` is the filtered query (no
 * order, no page); `read(count, limit)` runs the page's statement at its offset with `count` (the
 * capped count, aliased CAPPED_TOTAL) among its columns and the `limit` given, which is one more
 * than the page's: the extra row says whether more follow. Past the end (no row to carry the
 * count) the count is read alone; beyond the cap the estimate is a second statement (EXPLAIN).
 *
 * Both statements are planned for their values (PLANNED_PER_VALUES), never from a generic plan: the
 * values of a filter are skewed (an event type most events have, one no event has), and the generic
 * plan PostgreSQL settles on after five executions with a common value walked all 300,000 events
 * of a user through the user index for a type none of them has (270 ms, 0.7 ms planned for it).
 */
export async function readCappedPage(
  db: Knex,
  matching: () => Knex.QueryBuilder,
  page: { limit: number; offset: number },
  cap: number,
  read: (count: Knex.Raw, limit: number) => Promise<ReadonlyArray<Readonly<Record<string, unknown>>>>,
): Promise<CappedPage> {
  const capped = matching()
    .select(db.raw('1'))
    .limit(cap + 1)
    .toSQL();
  const countSql = `(SELECT count(*) FROM (${capped.sql}) AS capped) ${PLANNED_PER_VALUES}`;
  const bindings = capped.bindings as Knex.RawBinding[];
  const found = await read(db.raw(`${countSql} AS ${CAPPED_TOTAL}`, bindings), page.limit + 1);
  const hasMore = found.length > page.limit;
  const rows = hasMore ? found.slice(0, page.limit) : found;
  let counted = rows.length ? Number(rows[0]![CAPPED_TOTAL]) : 0;
  if (!rows.length && page.offset > 0) {
    const { rows: alone } = await db.raw<{ rows: Array<{ n: string }> }>(`SELECT ${countSql} AS n`, bindings);
    counted = Number(alone[0]!.n);
  }
  const { total, estimated } = await cappedTotal(
    { counted, cap, offset: page.offset, rows: rows.length, hasMore },
    () => estimateRows(db, matching()),
  );
  return { rows, total, estimated, hasMore };
}
