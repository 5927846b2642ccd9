import type { Geofence } from '../models/Geofence';
import { z } from '../zod';
import { iso } from './iso';

/** Geofence (spec §2): a circle; metadata is echoed in geofenceEvent pushes. */
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
    min_dwell_seconds: z.number().int().describe('a state change counts only after it held this long'),
    created_at: z.string().describe('ISO 8601'),
    updated_at: z.string().describe('ISO 8601'),
  })
  .openapi('Geofence');

/** A geofence as the API shows it. */
export function presentGeofence(g: Geofence): z.infer<typeof geofenceSchema> {
  return {
    id: g.id,
    name: g.name,
    description: g.description,
    latitude: g.latitude,
    longitude: g.longitude,
    radius_km: g.radius_km,
    is_active: g.is_active,
    metadata: g.metadata,
    min_dwell_seconds: g.min_dwell_seconds,
    created_at: iso(g.created_at),
    updated_at: iso(g.updated_at),
  };
}
