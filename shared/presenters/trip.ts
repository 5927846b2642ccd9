import { TRIP_STATUSES } from '../domain/tripStatus';
import type { Trip } from '../models/Trip';
import type { TripStatusHistory } from '../models/TripStatusHistory';
import { z } from '../zod';
import { iso } from './iso';

/** Figures computed from a trip's GPS points (single GET and GPX only). */
export interface TripStats {
  distance_km: number;
  duration_seconds: number;
}

/** Trip (spec §2); distance_km and duration_seconds only on the single GET. */
export const tripSchema = z
  .object({
    id: z.string().uuid(),
    name: z.string(),
    description: z.string().nullable(),
    status: z.enum(TRIP_STATUSES),
    gps_logging_enabled: z.boolean(),
    device_id: z.string().uuid().nullable(),
    category_id: z.string().uuid().nullable(),
    origin_id: z.string().uuid().nullable(),
    destination_id: z.string().uuid().nullable(),
    weight_kg: z.number().nullable(),
    notes: z.string().nullable(),
    tags: z.array(z.string()),
    start_latitude: z.number().nullable(),
    start_longitude: z.number().nullable(),
    end_latitude: z.number().nullable(),
    end_longitude: z.number().nullable(),
    started_at: z.string().describe('ISO 8601').nullable(),
    ended_at: z.string().describe('ISO 8601').nullable(),
    created_at: z.string().describe('ISO 8601'),
    updated_at: z.string().describe('ISO 8601'),
    distance_km: z.number().optional().describe('single GET only: sum of the distances between consecutive points'),
    duration_seconds: z.number().optional().describe('single GET only: first to last point'),
  })
  .openapi('Trip');

/** Trip status history entry (spec §2). */
export const tripHistorySchema = z
  .object({
    id: z.string().uuid(),
    trip_id: z.string().uuid(),
    old_status: z.string(),
    new_status: z.string(),
    changed_by: z.string().uuid().nullable(),
    latitude: z.number().nullable(),
    longitude: z.number().nullable(),
    changed_at: z.string().describe('ISO 8601'),
  })
  .openapi('TripStatusHistoryEntry');

/** A trip as the API shows it; with `stats`, also distance_km and duration_seconds. */
export function presentTrip(t: Trip, stats?: TripStats): z.infer<typeof tripSchema> {
  return {
    id: t.id,
    name: t.name,
    description: t.description,
    status: t.status,
    gps_logging_enabled: t.gps_logging_enabled,
    device_id: t.device_id,
    category_id: t.category_id,
    origin_id: t.origin_id,
    destination_id: t.destination_id,
    weight_kg: t.weight_kg,
    notes: t.notes,
    tags: t.tags ?? [],
    start_latitude: t.start_latitude,
    start_longitude: t.start_longitude,
    end_latitude: t.end_latitude,
    end_longitude: t.end_longitude,
    started_at: iso(t.started_at),
    ended_at: iso(t.ended_at),
    created_at: iso(t.created_at),
    updated_at: iso(t.updated_at),
    ...(stats ? { distance_km: stats.distance_km, duration_seconds: stats.duration_seconds } : {}),
  };
}

/** A status history entry as the API shows it. */
export function presentTripHistory(h: TripStatusHistory): z.infer<typeof tripHistorySchema> {
  return {
    id: h.id,
    trip_id: h.trip_id,
    old_status: h.old_status,
    new_status: h.new_status,
    changed_by: h.changed_by,
    latitude: h.latitude,
    longitude: h.longitude,
    changed_at: iso(h.changed_at),
  };
}
