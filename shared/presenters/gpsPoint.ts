import type { GpsPushData } from '../events';

/**
 * The columns of a gps_points row the presenter reads (a model instance or a plain knex row): the
 * pushed shape, with the timestamps still Dates.
 */
export type GpsPointRow = Omit<GpsPushData, 'timestamp' | 'created_at'> & { timestamp: Date; created_at: Date };

/** Column list matching GpsPointRow, for RETURNING and SELECT on the hot path. */
export const GPS_POINT_COLUMNS = [
  'id',
  'device_id',
  'trip_id',
  'latitude',
  'longitude',
  'altitude',
  'heading',
  'timestamp',
  'speed_kmh',
  'speed_mps',
  'speed_mph',
  'speed_knots',
  'pdop',
  'hdop',
  'vdop',
  'created_at',
] as const;

/** GPS point (spec §2): the same shape in REST responses and in the gpsUpdate push (spec §6). */
export function presentGpsPoint(p: GpsPointRow): GpsPushData {
  return {
    id: p.id,
    device_id: p.device_id,
    trip_id: p.trip_id,
    latitude: p.latitude,
    longitude: p.longitude,
    altitude: p.altitude,
    heading: p.heading,
    timestamp: p.timestamp.toISOString(),
    speed_kmh: p.speed_kmh,
    speed_mps: p.speed_mps,
    speed_mph: p.speed_mph,
    speed_knots: p.speed_knots,
    pdop: p.pdop,
    hdop: p.hdop,
    vdop: p.vdop,
    created_at: p.created_at.toISOString(),
  };
}
