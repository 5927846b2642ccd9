import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { TrackerLink } from '../caches/trackerLinks';
import { SIDE_EFFECT_OUTBOX } from '../outbox';
import type { GpsPointRow } from '../presenters/gpsPoint';

/** One validated GPS point as posted (spec §4.2): timestamp in integer Unix seconds. */
export interface GpsPointInput {
  latitude: number;
  longitude: number;
  altitude?: number | null;
  heading?: number | null;
  timestamp: number;
  speed_kmh: number;
  speed_mps: number;
  speed_mph: number;
  speed_knots: number;
  pdop?: number | null;
  hdop?: number | null;
  vdop?: number | null;
  device_id?: string | null;
  trip_id?: string | null;
}

/** A gps_points row before the insert gives it an id and created_at. */
export type NewGpsRow = Omit<GpsPointRow, 'id' | 'created_at'>;

/** The row of a posted point; a tracker key linked to a device speaks for that device and its active GPS-logging trip. */
export function toGpsRow(p: GpsPointInput, link: TrackerLink | null): NewGpsRow {
  return {
    device_id: link ? link.deviceId : (p.device_id ?? null),
    trip_id: link ? link.tripId : (p.trip_id ?? null),
    latitude: p.latitude,
    longitude: p.longitude,
    altitude: p.altitude ?? null,
    heading: p.heading ?? null,
    timestamp: new Date(p.timestamp * 1000),
    speed_kmh: p.speed_kmh,
    speed_mps: p.speed_mps,
    speed_mph: p.speed_mph,
    speed_knots: p.speed_knots,
    pdop: p.pdop ?? null,
    hdop: p.hdop ?? null,
    vdop: p.vdop ?? null,
  };
}

/** Columns written by ingestion and their Postgres array types for unnest(). */
const INSERT_COLUMNS: Array<[keyof NewGpsRow | 'id', string]> = [
  ['id', 'uuid'],
  ['device_id', 'text'],
  ['trip_id', 'uuid'],
  ['latitude', 'float8'],
  ['longitude', 'float8'],
  ['altitude', 'float8'],
  ['heading', 'float8'],
  ['timestamp', 'timestamptz'],
  ['speed_kmh', 'float8'],
  ['speed_mps', 'float8'],
  ['speed_mph', 'float8'],
  ['speed_knots', 'float8'],
  ['pdop', 'float8'],
  ['hdop', 'float8'],
  ['vdop', 'float8'],
];
const INSERT_COLUMN_LIST = INSERT_COLUMNS.map(([c]) => `"${c}"`).join(', ');
/**
 * The points' side effects go to the outbox in the same statement (a data-modifying CTE runs
 * whether or not it is referenced): one row per request, carrying the new ids in request order.
 */
const OUTBOX_ONE = `INSERT INTO ${SIDE_EFFECT_OUTBOX} (kind, payload) VALUES ('gpsPoints', jsonb_build_object('ids', jsonb_build_array($1::uuid)))`;
const OUTBOX_MANY = `INSERT INTO ${SIDE_EFFECT_OUTBOX} (kind, payload) VALUES ('gpsPoints', jsonb_build_object('ids', to_jsonb($1::uuid[])))`;
/** One row: a plain VALUES insert. Both statements are named, so each connection parses and plans them once. */
const INSERT_ONE = {
  name: 'gps_points_insert_one_v2',
  text: `WITH ins AS (
    INSERT INTO gps_points (${INSERT_COLUMN_LIST}) VALUES (${INSERT_COLUMNS.map(([, type], i) => `$${i + 1}::${type}`).join(', ')}) RETURNING id, created_at
  ), fx AS (${OUTBOX_ONE})
  SELECT id, created_at FROM ins`,
};
/** Many rows: one array per column (unnest), so the statement has 15 parameters whatever the batch size. */
const INSERT_MANY = {
  name: 'gps_points_insert_many_v2',
  text: `WITH ins AS (
    INSERT INTO gps_points (${INSERT_COLUMN_LIST})
    SELECT * FROM unnest(${INSERT_COLUMNS.map(([, type], i) => `$${i + 1}::${type}[]`).join(', ')}) RETURNING id, created_at
  ), fx AS (${OUTBOX_MANY})
  SELECT id, created_at FROM ins`,
};

/**
 * Many rows, one outbox row per point (group commit of single-point requests): the outbox then
 * looks exactly as if each request had inserted its point alone, in the same order.
 */
const OUTBOX_PER_ROW = `INSERT INTO ${SIDE_EFFECT_OUTBOX} (kind, payload) SELECT 'gpsPoints', jsonb_build_object('ids', jsonb_build_array(t.id)) FROM unnest($1::uuid[]) WITH ORDINALITY AS t(id, n) ORDER BY t.n`;
const INSERT_MANY_OUTBOX_PER_ROW = {
  name: 'gps_points_insert_many_outbox_per_row_v1',
  text: INSERT_MANY.text.replace(OUTBOX_MANY, OUTBOX_PER_ROW),
};

/** The pg client API this module uses on a connection borrowed from knex's pool. */
interface PgConnection {
  query(q: {
    name: string;
    text: string;
    values: unknown[];
  }): Promise<{ rows: Array<{ id: string; created_at: Date }> }>;
}

/**
 * Inserts all rows and their outbox row with one statement, as a named (prepared) statement on a
 * connection of knex's pool: the hot path skips query building and the server skips parsing and
 * planning. Ids are made here (v4, like gen_random_uuid()), so the stored rows are known without
 * reading them back: only created_at, the database's clock, is returned. Rows come back in order.
 * One outbox row carries all the points, or with `outboxRowPerPoint` each point has its own.
 */
export async function insertGpsRows(
  db: Knex,
  rows: NewGpsRow[],
  opts: { outboxRowPerPoint?: boolean } = {},
): Promise<GpsPointRow[]> {
  const withIds = rows.map((r) => ({ ...r, id: randomUUID() }));
  const values =
    withIds.length === 1
      ? INSERT_COLUMNS.map(([c]) => withIds[0][c])
      : // Each parameter is a whole column: pg sends a JS array as a Postgres array literal.
        INSERT_COLUMNS.map(([c]) => withIds.map((r) => r[c]));
  const conn = (await db.client.acquireConnection()) as PgConnection;
  let returned: Array<{ id: string; created_at: Date }>;
  try {
    const statement =
      withIds.length === 1 ? INSERT_ONE : opts.outboxRowPerPoint ? INSERT_MANY_OUTBOX_PER_ROW : INSERT_MANY;
    ({ rows: returned } = await conn.query({ ...statement, values }));
  } finally {
    await db.client.releaseConnection(conn);
  }
  const createdAt = new Map(returned.map((r) => [r.id, r.created_at]));
  return withIds.map((r) => ({ ...r, created_at: createdAt.get(r.id)! }));
}
