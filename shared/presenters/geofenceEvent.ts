import type { GeofenceEvent } from '../models/GeofenceEvent';
import { z } from '../zod';
import { iso } from './iso';

/** A recorded enter/exit (GET /v1/geofences/{id}/events, GET /v1/devices/{id}/geofence-events). */
export const geofenceEventSchema = z
  .object({
    id: z.string().uuid(),
    geofence_id: z.string().uuid(),
    device_id: z.string().nullable(),
    event: z.enum(['enter', 'exit']),
    distance_km: z.number(),
    latitude: z.number(),
    longitude: z.number(),
    gps_point_id: z.string().uuid().nullable(),
    occurred_at: z.string().describe('ISO 8601: timestamp of the GPS point that confirmed the change'),
    created_at: z.string().describe('ISO 8601'),
  })
  .openapi('GeofenceEvent');

export function presentGeofenceEvent(e: GeofenceEvent): z.infer<typeof geofenceEventSchema> {
  return {
    id: e.id,
    geofence_id: e.geofence_id,
    device_id: e.device_id,
    event: e.event,
    distance_km: e.distance_km,
    latitude: e.latitude,
    longitude: e.longitude,
    gps_point_id: e.gps_point_id,
    occurred_at: iso(e.occurred_at),
    created_at: iso(e.created_at),
  };
}
