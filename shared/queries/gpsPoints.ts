import type { Knex } from 'knex';
import { EARTH_RADIUS_KM, haversineSql } from '../geo';
import { GPS_POINT_COLUMNS, GpsPointRow } from '../presenters/gpsPoint';
import type { TripStats } from '../presenters/trip';
import { compiledOnce, turnBatcherByDb } from '../rowLoader';

/** The latest point of every device identifier, newest first. */
export async function latestPointPerDevice(db: Knex): Promise<GpsPointRow[]> {
  const cols = GPS_POINT_COLUMNS.map((c) => `g."${c}"`).join(', ');
  // Skip scan over the (device_id, timestamp) index: one probe per device, not a full scan.
  const { rows } = await db.raw<{ rows: GpsPointRow[] }>(
    `WITH RECURSIVE devices AS (
       (SELECT device_id FROM gps_points WHERE device_id IS NOT NULL ORDER BY device_id LIMIT 1)
       UNION ALL
       SELECT (SELECT device_id FROM gps_points WHERE device_id > devices.device_id ORDER BY device_id LIMIT 1)
         FROM devices WHERE devices.device_id IS NOT NULL
     )
     SELECT ${cols} FROM devices d
     CROSS JOIN LATERAL (
       SELECT * FROM gps_points p WHERE p.device_id = d.device_id
        ORDER BY p."timestamp" DESC, p.created_at DESC, p.id DESC LIMIT 1
     ) g
     WHERE d.device_id IS NOT NULL
     ORDER BY g."timestamp" DESC, g.device_id`,
  );
  return rows;
}

/** What a track point carries in an export (GPX): the columns a track is read with. */
export const TRACK_POINT_COLUMNS = [
  'latitude',
  'longitude',
  'altitude',
  'timestamp',
  'hdop',
  'vdop',
  'pdop',
  'speed_mps',
  'heading',
] as const;
export type TrackPoint = Pick<GpsPointRow, (typeof TRACK_POINT_COLUMNS)[number]>;

/**
 * Every point of a trip in track order (timestamp, then insertion), with the columns of
 * TRACK_POINT_COLUMNS only (pg parses every column of every row: a track is long); the text is
 * compiled once per database.
 */
const tripTrackSql = compiledOnce((db) =>
  db('gps_points')
    .where('trip_id', '')
    .orderBy([{ column: 'timestamp' }, { column: 'created_at' }, { column: 'id' }])
    .select(...TRACK_POINT_COLUMNS),
);
export async function tripTrack(db: Knex, tripId: string): Promise<TrackPoint[]> {
  const { rows } = await db.raw<{ rows: TrackPoint[] }>(tripTrackSql(db), [tripId]);
  return rows;
}

/**
 * Distance (sum of haversine legs between consecutive points, in km) and duration (first to last
 * point, in seconds) of a trip's track: stored in trip_track_stats, computed from the track only
 * after its points changed (migration 20261129000000_trip_track_stats says how they stay right),
 * and then from the new points alone when the track only grew at its end (migration
 * 20261207000100_incremental_trip_stats).
 */
export async function tripStats(db: Knex, tripId: string): Promise<TripStats> {
  return (await statsInTurn(db, tripId)) ?? { distance_km: 0, duration_seconds: 0 };
}

/** Haversine of each leg, from the previous point (`plat`, `plon`) to this one. */
const LEG = haversineSql('plat', 'plon', 'latitude', 'longitude');
/** The track order (the covering index gps_points_trip_track). */
const TRACK_ORDER = '"timestamp", created_at, id';

/**
 * One statement for the trips asked for in a turn. Rows whose figures are current are returned as
 * stored. The others are computed from the same snapshot as the version read, returned, and stored
 * if nobody has written to the trip since (SKIP LOCKED: a read never waits for a writer). A trip
 * without a row has no points.
 * - `whole`: every leg of the track (an index-only scan in track order, a window per trip).
 * - `added`: a track that only grew after the last point its stored figures counted
 *   (appends_only): the points past that one only (the same index, from the stored position on).
 *   The first new leg starts at the stored last point, and the stored distance is folded in before
 *   it, so the legs are added in the same order as the whole window adds them: the sum is the one
 *   `whole` would give, to the bit. Duration is last minus first timestamp either way.
 * - The last point (one probe of the index from its end) is stored with the figures, as the start
 *   of the next legs.
 */
const STATS_SQL = `WITH cur AS (
    SELECT trip_id, version, stats_version, distance_km, duration_seconds,
           stats_version IS NOT NULL AND appends_only AND last_ts IS NOT NULL AS appended,
           first_ts, last_ts, last_created_at, last_id, last_lat, last_lon
      FROM trip_track_stats WHERE trip_id = ANY(?::uuid[])
  ), whole AS (
    SELECT c.trip_id, c.version, agg.distance_km, agg.first_ts
      FROM cur c CROSS JOIN LATERAL (
        SELECT COALESCE(SUM(${LEG}), 0)::float8 AS distance_km, MIN(ts) AS first_ts
          FROM (SELECT latitude, longitude, "timestamp" AS ts,
                       lag(latitude) OVER w AS plat, lag(longitude) OVER w AS plon
                  FROM gps_points WHERE trip_id = c.trip_id
                WINDOW w AS (ORDER BY ${TRACK_ORDER})) legs
      ) agg
     WHERE c.stats_version IS DISTINCT FROM c.version AND NOT c.appended
  ), added AS (
    SELECT c.trip_id, c.version, COALESCE(agg.distance_km, c.distance_km) AS distance_km, c.first_ts
      FROM cur c CROSS JOIN LATERAL (
        SELECT SUM(CASE WHEN legs.first THEN c.distance_km + ${LEG} ELSE ${LEG} END)::float8 AS distance_km
          FROM (SELECT latitude, longitude, row_number() OVER w = 1 AS first,
                       lag(latitude, 1, c.last_lat) OVER w AS plat, lag(longitude, 1, c.last_lon) OVER w AS plon
                  FROM gps_points
                 WHERE trip_id = c.trip_id AND (${TRACK_ORDER}) > (c.last_ts, c.last_created_at, c.last_id)
                WINDOW w AS (ORDER BY ${TRACK_ORDER})) legs
      ) agg
     WHERE c.stats_version IS DISTINCT FROM c.version AND c.appended
  ), fresh AS (
    SELECT f.trip_id, f.version, f.distance_km, f.first_ts,
           COALESCE(EXTRACT(EPOCH FROM l.last_ts - f.first_ts), 0)::float8 AS duration_seconds,
           l.last_ts, l.last_created_at, l.last_id, l.last_lat, l.last_lon
      FROM (SELECT * FROM whole UNION ALL SELECT * FROM added) f
      LEFT JOIN LATERAL (
        SELECT "timestamp" AS last_ts, created_at AS last_created_at, id AS last_id,
               latitude AS last_lat, longitude AS last_lon
          FROM gps_points WHERE trip_id = f.trip_id
         ORDER BY "timestamp" DESC, created_at DESC, id DESC LIMIT 1
      ) l ON true
  ), saved AS (
    UPDATE trip_track_stats t
       SET stats_version = f.version, distance_km = f.distance_km, duration_seconds = f.duration_seconds,
           first_ts = f.first_ts, last_ts = f.last_ts, last_created_at = f.last_created_at, last_id = f.last_id,
           last_lat = f.last_lat, last_lon = f.last_lon, appends_only = true
      FROM fresh f
     WHERE t.trip_id = f.trip_id AND t.version = f.version
       AND t.trip_id IN (SELECT l.trip_id FROM trip_track_stats l
                          WHERE l.trip_id IN (SELECT trip_id FROM fresh) FOR UPDATE SKIP LOCKED)
  )
  SELECT trip_id, distance_km, duration_seconds FROM cur WHERE stats_version = version
  UNION ALL
  SELECT trip_id, distance_km, duration_seconds FROM fresh`;

const statsInTurn = turnBatcherByDb(async (db, tripIds): Promise<Map<string, TripStats>> => {
  const { rows } = await db.raw<{
    rows: Array<{ trip_id: string; distance_km: number | null; duration_seconds: number | null }>;
  }>(STATS_SQL, [tripIds, EARTH_RADIUS_KM, EARTH_RADIUS_KM, EARTH_RADIUS_KM]);
  return new Map(
    rows.map((r) => [
      r.trip_id,
      {
        distance_km: Math.round(Number(r.distance_km ?? 0) * 1000) / 1000,
        duration_seconds: Math.round(Number(r.duration_seconds ?? 0)),
      },
    ]),
  );
});
