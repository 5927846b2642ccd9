import type { ZodTypeAny } from 'zod';
import { z, zFinite } from '../../../shared/zod';

/**
 * Request field builders and response schemas shared by the tracking routers (GPS, devices, trips,
 * locations, geofences, trip categories, trip templates), so each field is validated the same way
 * everywhere and the OpenAPI document shows the real shapes.
 */

export const zName = (max = 255) => z.string({ invalid_type_error: 'must be a string' }).trim().min(1, 'must not be empty').max(max);
export const zText = (max = 10_000) => z.string({ invalid_type_error: 'must be a string' }).max(max).nullable().optional();
export const zLatitude = () => zFinite().min(-90, 'must be between -90 and 90').max(90, 'must be between -90 and 90');
export const zLongitude = () => zFinite().min(-180, 'must be between -180 and 180').max(180, 'must be between -180 and 180');
export const zTags = () => z.array(z.string().trim().min(1).max(100)).max(100).transform((t) => [...new Set(t)]);
export const zWeight = () => zFinite().min(0, 'must be >= 0');

const links = z.object({ self: z.string() });
const pageLinks = z.object({ self: z.string(), first: z.string(), last: z.string(), prev: z.string().optional(), next: z.string().optional() });

/** `{data, _links}` around a schema. */
export const single = (schema: ZodTypeAny) => z.object({ data: schema, _links: links });
/** A paginated list of a schema. */
export const paged = (schema: ZodTypeAny) =>
  z.object({ data: z.array(schema), pagination: z.object({ page: z.number(), limit: z.number(), total: z.number(), total_pages: z.number() }), _links: pageLinks });

const ts = () => z.string().describe('ISO 8601');
const num = () => z.number().nullable();

export const gpsPointSchema = z
  .object({
    id: z.string().uuid(),
    device_id: z.string().nullable(),
    trip_id: z.string().uuid().nullable(),
    latitude: z.number(),
    longitude: z.number(),
    altitude: num(),
    heading: num(),
    timestamp: ts(),
    speed_kmh: z.number(),
    speed_mps: z.number(),
    speed_mph: z.number(),
    speed_knots: z.number(),
    pdop: num(),
    hdop: num(),
    vdop: num(),
    created_at: ts(),
  })
  .openapi('GpsPoint');

export const deviceSchema = z
  .object({
    id: z.string().uuid(),
    name: z.string(),
    description: z.string().nullable(),
    device_type: z.string().nullable(),
    is_active: z.boolean(),
    api_key_id: z.string().uuid().nullable(),
    created_at: ts(),
    updated_at: ts(),
  })
  .openapi('Device');

export const tripSchema = z
  .object({
    id: z.string().uuid(),
    name: z.string(),
    description: z.string().nullable(),
    status: z.enum(['draft', 'active', 'paused', 'completed']),
    gps_logging_enabled: z.boolean(),
    device_id: z.string().uuid().nullable(),
    category_id: z.string().uuid().nullable(),
    origin_id: z.string().uuid().nullable(),
    destination_id: z.string().uuid().nullable(),
    weight_kg: num(),
    notes: z.string().nullable(),
    tags: z.array(z.string()),
    start_latitude: num(),
    start_longitude: num(),
    end_latitude: num(),
    end_longitude: num(),
    started_at: ts().nullable(),
    ended_at: ts().nullable(),
    created_at: ts(),
    updated_at: ts(),
    distance_km: z.number().optional().describe('single GET only: sum of the distances between consecutive points'),
    duration_seconds: z.number().optional().describe('single GET only: first to last point'),
  })
  .openapi('Trip');

export const tripHistorySchema = z
  .object({
    id: z.string().uuid(),
    trip_id: z.string().uuid(),
    old_status: z.string(),
    new_status: z.string(),
    changed_by: z.string().uuid().nullable(),
    latitude: num(),
    longitude: num(),
    changed_at: ts(),
  })
  .openapi('TripStatusHistoryEntry');

export const locationContactSchema = z
  .object({
    id: z.string().uuid(),
    location_id: z.string().uuid(),
    name: z.string(),
    phone: z.string().nullable(),
    email: z.string().nullable(),
    role: z.string().nullable(),
    created_at: ts(),
  })
  .openapi('LocationContact');

export const locationSchema = z
  .object({
    id: z.string().uuid(),
    name: z.string(),
    street: z.string().nullable(),
    zip: z.string().nullable(),
    city: z.string().nullable(),
    country: z.string().nullable(),
    latitude: num(),
    longitude: num(),
    notes: z.string().nullable(),
    is_active: z.boolean(),
    created_at: ts(),
    updated_at: ts(),
    contacts: z.array(locationContactSchema).optional().describe('single GET and create only'),
  })
  .openapi('Location');

export const geofenceSchema = z
  .object({
    id: z.string().uuid(),
    name: z.string(),
    description: z.string().nullable(),
    latitude: z.number(),
    longitude: z.number(),
    radius_km: z.number(),
    is_active: z.boolean(),
    metadata: z.record(z.unknown()).nullable(),
    created_at: ts(),
    updated_at: ts(),
  })
  .openapi('Geofence');

export const tripCategorySchema = z
  .object({
    id: z.string().uuid(),
    parent_id: z.string().uuid().nullable(),
    name: z.string(),
    description: z.string().nullable(),
    color: z.string().nullable(),
    is_active: z.boolean(),
    sort_order: z.number().int(),
    created_at: ts(),
    updated_at: ts(),
  })
  .openapi('TripCategory');

export const tripTemplateSchema = z
  .object({
    id: z.string().uuid(),
    name: z.string(),
    description: z.string().nullable(),
    category_id: z.string().uuid().nullable(),
    origin_id: z.string().uuid().nullable(),
    destination_id: z.string().uuid().nullable(),
    device_id: z.string().uuid().nullable(),
    gps_logging_enabled: z.boolean(),
    default_weight_kg: num(),
    notes: z.string().nullable(),
    tags: z.array(z.string()),
    created_at: ts(),
    updated_at: ts(),
  })
  .openapi('TripTemplate');

/** Standard error documentation for the tracking routes. */
export const errors = {
  400: { description: 'Invalid input; the message names the field' },
  401: { description: 'Missing or invalid credentials' },
  403: { description: 'Missing permission' },
  404: { description: 'Not found' },
};
