import { z } from '../zod';
import { iso } from './iso';

/** GPS point (spec §2): the same shape in REST responses and in the gpsUpdate push (spec §6). */
export const gpsPointSchema = z
  .object({
    id: z.string().uuid(),
    device_id: z.string().nullable(),
    trip_id: z.string().uuid().nullable(),
    latitude: z.number(),
    longitude: z.number(),
    altitude: z.number().nullable(),
    heading: z.number().nullable(),
    timestamp: z.string().describe('ISO 8601'),
    speed_kmh: z.number(),
    speed_mps: z.number(),
    speed_mph: z.number(),
    speed_knots: z.number(),
    pdop: z.number().nullable(),
    hdop: z.number().nullable(),
    vdop: z.number().nullable(),
    created_at: z.string().describe('ISO 8601'),
  })
  .openapi('GpsPoint');

export type GpsPoint = z.infer<typeof gpsPointSchema>;

/**
 * The columns of a gps_points row the presenter reads (a model instance or a plain knex row): the
 * presented shape, with the timestamps still Dates.
 */
export type GpsPointRow = Omit<GpsPoint, 'timestamp' | 'created_at'> & { timestamp: Date; created_at: Date };

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

/** A GPS point as the API and the gpsUpdate push show it. */
export function presentGpsPoint(p: GpsPointRow): GpsPoint {
  return {
    id: p.id,
    device_id: p.device_id,
    trip_id: p.trip_id,
    latitude: p.latitude,
    longitude: p.longitude,
    altitude: p.altitude,
    heading: p.heading,
    timestamp: iso(p.timestamp),
    speed_kmh: p.speed_kmh,
    speed_mps: p.speed_mps,
    speed_mph: p.speed_mph,
    speed_knots: p.speed_knots,
    pdop: p.pdop,
    hdop: p.hdop,
    vdop: p.vdop,
    created_at: iso(p.created_at),
  };
}

/** A point of a batch that was not stored: its index in the request and why. */
const gpsBatchRejectionSchema = z.object({
  index: z.number().int(),
  errors: z.array(z.object({ field: z.string(), message: z.string() })),
});

/** Outcome of POST /v1/gps/batch: the stored points (index in the request, new id) and the rejected ones. */
export const gpsBatchResultSchema = z.object({
  accepted: z.array(z.object({ index: z.number().int(), id: z.string().uuid() })),
  rejected: z.array(gpsBatchRejectionSchema),
});

export type GpsBatchRejection = z.infer<typeof gpsBatchRejectionSchema>;
export type GpsBatchResult = z.infer<typeof gpsBatchResultSchema>;
