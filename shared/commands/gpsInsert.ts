import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { tripOfTrackerPoint, type TrackerLink } from '../caches/trackerLinks';
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

/**
 * The row of a posted point; a tracker key linked to a device speaks for that device and its active
 * GPS-logging trip (for points dated from the trip's start on: tripOfTrackerPoint).
 */
export function toGpsRow(p: GpsPointInput, link: TrackerLink | null): NewGpsRow {
  return {
    device_id: link ? link.deviceId : (p.device_id ?? null),
    trip_id: link ? tripOfTrackerPoint(link, p.timestamp * 1000) : (p.trip_id ?? null),
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

/**
 * Columns written by ingestion, how each travels as a Postgres array literal, and its array type
 * for unnest(). The literals are built here (`arrayLiteral`) rather than by pg's generic value
 * serializer: one string per column, no per-element type dispatch, and timestamps as UTC ISO
 * strings (Date#toISOString) instead of pg's local-time formatting.
 */
type ColumnKind = 'uuid' | 'text' | 'float8' | 'timestamptz';
const INSERT_COLUMNS: Array<[keyof NewGpsRow | 'id', ColumnKind]> = [
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
/** created_at is written explicitly as now(): one value for the whole statement, returned once. */
const INSERT_COLUMN_LIST = [...INSERT_COLUMNS.map(([c]) => `"${c}"`), '"created_at"'].join(', ');
/**
 * The points' side effects go to the outbox in the same statement (a data-modifying CTE runs
 * whether or not it is referenced): one row per statement, carrying the new ids in row order. The
 * relay carries out claimed rows in id order and each row's ids in order, so a row of many points
 * is relayed exactly as that many rows of one point would be, for a fraction of the writes.
 */
const OUTBOX_ONE = `INSERT INTO ${SIDE_EFFECT_OUTBOX} (kind, payload) VALUES ('gpsPoints', jsonb_build_object('ids', jsonb_build_array($1::uuid)))`;
const OUTBOX_MANY = `INSERT INTO ${SIDE_EFFECT_OUTBOX} (kind, payload) VALUES ('gpsPoints', jsonb_build_object('ids', to_jsonb($1::uuid[])))`;
/**
 * Every statement returns one row, now(): the transaction's start, which is the created_at of
 * every point it wrote. The ids are made here, so nothing else needs reading back.
 */
const RETURN_CREATED_AT = 'SELECT now() AS created_at';
/** One row: a plain VALUES insert. Both statements are named, so each connection parses and plans them once. */
const INSERT_ONE = {
  name: 'gps_points_insert_one_v3',
  text: `WITH ins AS (
    INSERT INTO gps_points (${INSERT_COLUMN_LIST}) VALUES (${INSERT_COLUMNS.map(([, type], i) => `$${i + 1}::${type}`).join(', ')}, now())
  ), fx AS (${OUTBOX_ONE})
  ${RETURN_CREATED_AT}`,
};
/** Many rows: one array per column (unnest), so the statement has 15 parameters whatever the batch size. */
const INSERT_MANY = {
  name: 'gps_points_insert_many_v3',
  text: `WITH ins AS (
    INSERT INTO gps_points (${INSERT_COLUMN_LIST})
    SELECT *, now() FROM unnest(${INSERT_COLUMNS.map(([, type], i) => `$${i + 1}::${type}[]`).join(', ')})
  ), fx AS (${OUTBOX_MANY})
  ${RETURN_CREATED_AT}`,
};

/** A text element of an array literal: always quoted (so a value spelled NULL stays text), `"` and `\\` escaped. */
const quoteText = (s: string) => `"${s.replace(/["\\]/g, '\\$&')}"`;

/** One element of a column's array literal. */
function element(kind: ColumnKind, v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  switch (kind) {
    case 'uuid':
      // Ours (randomUUID) or validated at the edge: hex and dashes, nothing to quote.
      return v as string;
    case 'text':
      return quoteText(v as string);
    case 'timestamptz':
      return (v as Date).toISOString();
    case 'float8':
      if (typeof v !== 'number' || !Number.isFinite(v)) throw new TypeError(`not a finite number: ${String(v)}`);
      return String(v);
  }
}

/** A Postgres array literal of one column of `rows`. */
function arrayLiteral(kind: ColumnKind, column: string, rows: ReadonlyArray<Record<string, unknown>>): string {
  let out = '{';
  for (let i = 0; i < rows.length; i++) out += (i ? ',' : '') + element(kind, rows[i][column]);
  return out + '}';
}

/** One parameter of the single-row statement (pg sends it as text). */
const scalar = (kind: ColumnKind, v: unknown) =>
  v === null || v === undefined ? null : kind === 'timestamptz' ? (v as Date).toISOString() : v;

/** The pg client API this module uses on a connection borrowed from knex's pool. */
interface PgConnection {
  query(q: { name: string; text: string; values: unknown[] }): Promise<{ rows: Array<{ created_at: Date }> }>;
}

/** The stored row of a new point: one object of one shape (the presenter's column order). */
const storedRow = (r: NewGpsRow, id: string, createdAt: Date): GpsPointRow => ({
  id,
  device_id: r.device_id,
  trip_id: r.trip_id,
  latitude: r.latitude,
  longitude: r.longitude,
  altitude: r.altitude,
  heading: r.heading,
  timestamp: r.timestamp,
  speed_kmh: r.speed_kmh,
  speed_mps: r.speed_mps,
  speed_mph: r.speed_mph,
  speed_knots: r.speed_knots,
  pdop: r.pdop,
  hdop: r.hdop,
  vdop: r.vdop,
  created_at: createdAt,
});

/**
 * Inserts all rows and their outbox row with one statement, as a named (prepared) statement on a
 * connection of knex's pool: the hot path skips query building and the server skips parsing and
 * planning. Ids are made here (v4, like gen_random_uuid()), and created_at is the statement's
 * now(), so the stored rows are known from one returned value. Rows come back in order.
 * One outbox row carries all the points.
 */
export async function insertGpsRows(db: Knex, rows: NewGpsRow[]): Promise<GpsPointRow[]> {
  const ids = rows.map(() => randomUUID());
  let statement: { name: string; text: string };
  let values: unknown[];
  if (rows.length === 1) {
    const row = rows[0] as unknown as Record<string, unknown>;
    statement = INSERT_ONE;
    values = INSERT_COLUMNS.map(([c, kind]) => (c === 'id' ? ids[0] : scalar(kind, row[c])));
  } else {
    statement = INSERT_MANY;
    const records = rows as unknown as Array<Record<string, unknown>>;
    // Each parameter is a whole column, as one array literal.
    values = INSERT_COLUMNS.map(([c, kind]) => (c === 'id' ? `{${ids.join(',')}}` : arrayLiteral(kind, c, records)));
  }
  const conn = (await db.client.acquireConnection()) as PgConnection;
  let createdAt: Date;
  try {
    ({
      rows: [{ created_at: createdAt }],
    } = await conn.query({ ...statement, values }));
  } finally {
    await db.client.releaseConnection(conn);
  }
  return rows.map((r, i) => storedRow(r, ids[i], createdAt));
}
