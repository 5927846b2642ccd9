import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type Redis from 'ioredis';
import type { Config } from '../config';
import { badRequest } from '../errors';
import type { GpsPushData } from '../events';
import type { Logger } from '../logger';
import type { Principal } from '../policies';
import { GpsPointRow, presentGpsPoint } from '../presenters/gpsPoint';
import { OutboxRelay, SIDE_EFFECT_OUTBOX } from '../outbox';
import { z, zFinite, zUuid } from '../zod';
import { forgetLatestGps, recordLatestGps } from '../caches/gpsLatest';
import { TrackerLink, trackerLinkFor } from '../caches/trackerLinks';

/** Latest accepted Unix second (9999-12-31): larger values are almost always milliseconds by mistake. */
const MAX_UNIX_SECONDS = 253_402_300_799;

const nonNegative = () => zFinite().min(0, 'must be >= 0');

/** One GPS point as posted (spec §4.2): timestamp in integer Unix seconds, all four speeds required. */
export const gpsPointInput = z.object({
  latitude: zFinite().min(-90, 'must be between -90 and 90').max(90, 'must be between -90 and 90'),
  longitude: zFinite().min(-180, 'must be between -180 and 180').max(180, 'must be between -180 and 180'),
  altitude: zFinite().nullable().optional(),
  heading: zFinite().min(0, 'must be between 0 and 360').max(360, 'must be between 0 and 360').nullable().optional(),
  timestamp: z
    .number({ required_error: 'Required', invalid_type_error: 'must be an integer (Unix seconds)' })
    .int('must be an integer (Unix seconds)')
    .min(0, 'must be >= 0 (Unix seconds)')
    .max(MAX_UNIX_SECONDS, 'must be Unix seconds, not milliseconds'),
  speed_kmh: nonNegative(),
  speed_mps: nonNegative(),
  speed_mph: nonNegative(),
  speed_knots: nonNegative(),
  pdop: nonNegative().nullable().optional(),
  hdop: nonNegative().nullable().optional(),
  vdop: nonNegative().nullable().optional(),
  device_id: z.string().trim().min(1).max(100).nullable().optional().openapi({ description: 'Device identifier; ignored when the caller is a tracker key linked to a device' }),
  trip_id: zUuid().nullable().optional().openapi({ description: 'Trip; ignored when the caller is a tracker key linked to a device' }),
});
export type GpsPointInput = z.infer<typeof gpsPointInput>;

/** Batch ingest limit of POST /v1/gps/batch. */
export const GPS_BATCH_MAX = 1000;

/** What ingestion needs from a process: database, cache, and the side-effect relay to wake. */
export interface IngestDeps {
  db: Knex;
  redis: Redis;
  config: Pick<Config, 'redisPrefix'>;
  logger: Logger;
  outbox: Pick<OutboxRelay, 'wake'>;
}

type NewGpsRow = Omit<GpsPointRow, 'id' | 'created_at'>;

function toRow(p: GpsPointInput, link: TrackerLink | null): NewGpsRow {
  return {
    // A tracker key linked to a device speaks for that device and its active GPS-logging trip.
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

/** The subset of trip ids that exist (one query). */
async function existingTrips(db: Knex, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db('trips').whereIn('id', ids).select('id');
  return new Set(rows.map((r) => r.id as string));
}

/**
 * After the insert has committed: wake the side-effect relay (the statement also wrote the points'
 * outbox row: gpsUpdate pushes and geofence evaluation happen from there, also after a Redis
 * outage), and raise the latest-point cache, awaited so `current` is never staler than the answer.
 * A cache that cannot be raised is dropped; with Redis down neither works and `current` reads the
 * database until the relay raises the cache once Redis is back.
 */
async function afterGpsInsert(deps: IngestDeps, rows: GpsPointRow[]): Promise<GpsPushData[]> {
  deps.outbox.wake();
  try {
    await recordLatestGps(deps.db, deps.redis, deps.config, rows);
  } catch (err) {
    // A cache we could not raise must not keep serving an older point as the latest.
    deps.logger.warn({ err: (err as Error).message }, 'could not update the latest GPS cache');
    await forgetLatestGps(deps.redis, deps.config, rows.map((r) => r.device_id)).catch(() => undefined);
  }
  return rows.map(presentGpsPoint);
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

/** The pg client API this module uses on a connection borrowed from knex's pool. */
interface PgConnection {
  query(q: { name: string; text: string; values: unknown[] }): Promise<{ rows: Array<{ id: string; created_at: Date }> }>;
}

/**
 * Inserts all rows and their outbox row with one statement, as a named (prepared) statement on a
 * connection of knex's pool: the hot path skips query building and the server skips parsing and
 * planning. Ids are made here (v4, like gen_random_uuid()), so the stored rows are known without
 * reading them back: only created_at, the database's clock, is returned.
 */
async function insertRows(db: Knex, rows: NewGpsRow[]): Promise<GpsPointRow[]> {
  const withIds = rows.map((r) => ({ ...r, id: randomUUID() }));
  const values =
    withIds.length === 1
      ? INSERT_COLUMNS.map(([c]) => withIds[0][c])
      : // Each parameter is a whole column: pg sends a JS array as a Postgres array literal.
        INSERT_COLUMNS.map(([c]) => withIds.map((r) => r[c]));
  const conn = (await db.client.acquireConnection()) as PgConnection;
  let returned: Array<{ id: string; created_at: Date }>;
  try {
    ({ rows: returned } = await conn.query({ ...(withIds.length === 1 ? INSERT_ONE : INSERT_MANY), values }));
  } finally {
    await db.client.releaseConnection(conn);
  }
  const createdAt = new Map(returned.map((r) => [r.id, r.created_at]));
  return withIds.map((r) => ({ ...r, created_at: createdAt.get(r.id)! }));
}

/** Ingests one validated point for `principal` (POST /v1/gps). */
export async function ingestGpsPoint(deps: IngestDeps, principal: Principal, input: GpsPointInput): Promise<GpsPushData> {
  const link = await trackerLinkFor(deps.db, principal);
  const row = toRow(input, link);
  if (row.trip_id && !link && !(await existingTrips(deps.db, [row.trip_id])).has(row.trip_id)) throw badRequest('trip_id: no such trip');
  const [inserted] = await insertRows(deps.db, [row]);
  const [presented] = await afterGpsInsert(deps, [inserted]);
  return presented;
}

export interface BatchRejection {
  index: number;
  errors: Array<{ field: string; message: string }>;
}

export interface BatchResult {
  accepted: Array<{ index: number; id: string }>;
  rejected: BatchRejection[];
}

/**
 * Ingests up to GPS_BATCH_MAX points in one multi-row INSERT (POST /v1/gps/batch). Each point is
 * validated on its own; invalid ones are reported by index and the valid ones are stored.
 */
export async function ingestGpsBatch(deps: IngestDeps, principal: Principal, points: unknown[]): Promise<BatchResult> {
  const link = await trackerLinkFor(deps.db, principal);
  const rejected: BatchRejection[] = [];
  const valid: Array<{ index: number; row: NewGpsRow }> = [];
  points.forEach((raw, index) => {
    const r = gpsPointInput.safeParse(raw);
    if (r.success) valid.push({ index, row: toRow(r.data, link) });
    else rejected.push({ index, errors: r.error.issues.map((i) => ({ field: i.path.length ? i.path.join('.') : 'point', message: i.message })) });
  });
  if (!link) {
    const known = await existingTrips(deps.db, [...new Set(valid.map((v) => v.row.trip_id).filter((t): t is string => !!t))]);
    for (let i = valid.length - 1; i >= 0; i--) {
      const tripId = valid[i].row.trip_id;
      if (tripId && !known.has(tripId)) {
        rejected.push({ index: valid[i].index, errors: [{ field: 'trip_id', message: 'no such trip' }] });
        valid.splice(i, 1);
      }
    }
    rejected.sort((a, b) => a.index - b.index);
  }
  if (valid.length === 0) return { accepted: [], rejected };
  const inserted = await insertRows(deps.db, valid.map((v) => v.row));
  await afterGpsInsert(deps, inserted);
  // RETURNING yields rows in VALUES order for a plain INSERT.
  return { accepted: inserted.map((row, i) => ({ index: valid[i].index, id: row.id })), rejected };
}
