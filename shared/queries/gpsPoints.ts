import type { Knex } from 'knex';
import { EARTH_RADIUS_KM, haversineSql } from '../geo';
import { GPS_POINT_COLUMNS, GpsPointRow } from '../presenters/gpsPoint';
import type { TripStats } from '../presenters/trip';
import { turnBatcherByDb } from '../rowLoader';

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

/** Every point of a trip in track order (timestamp, then insertion). */
export async function tripTrack(db: Knex, tripId: string): Promise<GpsPointRow[]> {
  return db('gps_points')
    .where('trip_id', tripId)
    .orderBy([{ column: 'timestamp' }, { column: 'created_at' }, { column: 'id' }])
    .select(...GPS_POINT_COLUMNS) as Promise<GpsPointRow[]>;
}

/**
 * Distance (sum of haversine legs between consecutive points, in km) and duration (first to last
 * point, in seconds) of a trip's track, computed in SQL.
 */
export async function tripStats(db: Knex, tripId: string): Promise<TripStats> {
  return (await statsInTurn(db, tripId)) ?? { distance_km: 0, duration_seconds: 0 };
}

/** Stats of every trip asked for in one turn: one statement, a window per trip (PARTITION BY). */
const statsInTurn = turnBatcherByDb(async (db, tripIds): Promise<Map<string, TripStats>> => {
  const { rows } = await db.raw<{
    rows: Array<{ trip_id: string; distance_km: number | null; duration_seconds: number | null }>;
  }>(
    `SELECT trip_id,
            COALESCE(SUM(${haversineSql('plat', 'plon', 'latitude', 'longitude')}), 0) AS distance_km,
            COALESCE(EXTRACT(EPOCH FROM MAX(ts) - MIN(ts)), 0) AS duration_seconds
       FROM (SELECT trip_id, latitude, longitude, "timestamp" AS ts,
                    lag(latitude) OVER w AS plat, lag(longitude) OVER w AS plon
               FROM gps_points WHERE trip_id = ANY(?::uuid[])
             WINDOW w AS (PARTITION BY trip_id ORDER BY "timestamp", created_at, id)) legs
      GROUP BY trip_id`,
    [EARTH_RADIUS_KM, tripIds],
  );
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
