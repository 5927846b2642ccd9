import type { Trip } from '../models/Trip';
import type { TripStatusHistory } from '../models/TripStatusHistory';
import { iso } from './iso';

/** Figures computed from a trip's GPS points (single GET and GPX only). */
export interface TripStats {
  distance_km: number;
  duration_seconds: number;
}

/** Trip (spec §2); with `stats`, also distance_km and duration_seconds. */
export function presentTrip(t: Trip, stats?: TripStats) {
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
    created_at: t.created_at.toISOString(),
    updated_at: t.updated_at.toISOString(),
    ...(stats ? { distance_km: stats.distance_km, duration_seconds: stats.duration_seconds } : {}),
  };
}

/** Trip status history entry (spec §2). */
export function presentTripHistory(h: TripStatusHistory) {
  return {
    id: h.id,
    trip_id: h.trip_id,
    old_status: h.old_status,
    new_status: h.new_status,
    changed_by: h.changed_by,
    latitude: h.latitude,
    longitude: h.longitude,
    changed_at: h.changed_at.toISOString(),
  };
}
