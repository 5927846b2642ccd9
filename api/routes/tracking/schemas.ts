import type { GpsBatchInput } from '../../../shared/commands/ingestGps';
import { z, zChars, zFinite, zInput, zList, zUuid } from '../../../shared/zod';

/**
 * Request field builders shared by the tracking routers (GPS, devices, trips, locations, geofences,
 * trip categories, trip templates), so each field is validated the same way everywhere. Response
 * schemas live with their presenters (shared/presenters).
 */

const zString = () => z.string({ invalid_type_error: 'must be a string' });
/** A name of at most `max` characters (zChars: code points, as the database counts them). */
export const zName = (max = 255) => zChars({ trim: true, min: 1, max }, zString());
export const zText = (max = 10_000) => zChars({ max }, zString()).nullable().optional();
export const zLatitude = () => zFinite().min(-90, 'must be between -90 and 90').max(90, 'must be between -90 and 90');
export const zLongitude = () =>
  zFinite().min(-180, 'must be between -180 and 180').max(180, 'must be between -180 and 180');
export const zTags = () =>
  zList(zChars({ trim: true, min: 1, max: 100 }), { max: 100 }).transform((t) => [...new Set(t)]);
export const zWeight = () => zFinite().min(0, 'must be >= 0');

/** `:id` of a tracking resource. */
export const idParam = z.object({ id: zUuid() });

/** Latest accepted Unix second (9999-12-31): larger values are almost always milliseconds by mistake. */
const MAX_UNIX_SECONDS = 253_402_300_799;
/**
 * How far ahead of the server's clock a point may be dated (clock skew of a tracker). A point from
 * further ahead would stay the device's current position and make every real point after it look
 * older (late) to the geofence evaluation until the future caught up.
 */
export const GPS_MAX_FUTURE_SECONDS = 600;

const nonNegative = () => zFinite().min(0, 'must be >= 0');

/** One GPS point as posted (spec §4.2): timestamp in integer Unix seconds, all four speeds required. */
export const gpsPointInput = z
  .object({
    latitude: zLatitude(),
    longitude: zLongitude(),
    altitude: zFinite().nullable().optional(),
    heading: zFinite().min(0, 'must be between 0 and 360').max(360, 'must be between 0 and 360').nullable().optional(),
    timestamp: z
      .number({ required_error: 'Required', invalid_type_error: 'must be an integer (Unix seconds)' })
      // Before .int: `1e400` (Infinity to JSON.parse) is said the same way as in every number field.
      .finite('number too large (beyond ±1.8e308)')
      .int('must be an integer (Unix seconds)')
      .min(0, 'must be >= 0 (Unix seconds)')
      .max(MAX_UNIX_SECONDS, 'must be Unix seconds, not milliseconds')
      .refine(
        // (Past the maximum the message above says it all.)
        (t) => t > MAX_UNIX_SECONDS || t <= Date.now() / 1000 + GPS_MAX_FUTURE_SECONDS,
        `must not be more than ${GPS_MAX_FUTURE_SECONDS} s ahead of the server's clock`,
      )
      .openapi({
        description: `Unix seconds, at most ${GPS_MAX_FUTURE_SECONDS} s ahead of the server's clock (a tracker's clock skew)`,
      }),
    speed_kmh: nonNegative(),
    speed_mps: nonNegative(),
    speed_mph: nonNegative(),
    speed_knots: nonNegative(),
    pdop: nonNegative().nullable().optional(),
    hdop: nonNegative().nullable().optional(),
    vdop: nonNegative().nullable().optional(),
    device_id: zChars({ trim: true, min: 1, max: 100 })
      .nullable()
      .optional()
      .openapi({ description: 'Device identifier; ignored when the caller is a tracker key linked to a device' }),
    trip_id: zUuid()
      .nullable()
      .optional()
      .openapi({ description: 'Trip; ignored when the caller is a tracker key linked to a device' }),
  })
  .openapi('GpsPointInput');

/** Batch ingest limit of POST /v1/gps/batch. */
export const GPS_BATCH_MAX = 1000;

/** POST /v1/gps/batch: the points stay unknown here, each is validated on its own (gpsBatchPoints). */
export const gpsBatchBody = z.object({
  points: z
    .array(z.unknown(), { required_error: 'Required', invalid_type_error: 'must be an array of GPS points' })
    .min(1, 'must contain at least one point')
    .max(GPS_BATCH_MAX, `must contain at most ${GPS_BATCH_MAX} points`)
    .describe('GPS points, each shaped like the body of POST /v1/gps (GpsPointInput)'),
});

/** One point of a batch: the text rule of every body (no NUL, no unpaired surrogate), then the point's schema. */
const batchPoint = zInput(gpsPointInput);

/** Validates each point of a batch on its own: the valid ones by index, the others with their errors. */
export function gpsBatchPoints(points: unknown[]): GpsBatchInput {
  const batch: GpsBatchInput = { valid: [], rejected: [] };
  points.forEach((raw, index) => {
    const r = batchPoint.safeParse(raw);
    if (r.success) batch.valid.push({ index, point: r.data });
    else {
      // One error per field, the first: `1e400` as a latitude is too large, and (as Infinity)
      // outside -90..90 too, which says nothing more.
      const errors = new Map<string, string>();
      for (const i of r.error.issues) {
        const field = i.path.length ? i.path.join('.') : 'point';
        if (!errors.has(field)) errors.set(field, i.message);
      }
      batch.rejected.push({ index, errors: [...errors].map(([field, message]) => ({ field, message })) });
    }
  });
  return batch;
}

/** Standard error documentation for the tracking routes. */
export const errors = {
  400: { description: 'Invalid input; the message names the field' },
  401: { description: 'Missing or invalid credentials' },
  403: { description: 'Missing permission' },
  404: { description: 'Not found' },
};
