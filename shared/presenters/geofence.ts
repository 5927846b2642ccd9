import type { Geofence } from '../models/Geofence';

/** Geofence (spec §2). */
export function presentGeofence(g: Geofence) {
  return {
    id: g.id,
    name: g.name,
    description: g.description,
    latitude: g.latitude,
    longitude: g.longitude,
    radius_km: g.radius_km,
    is_active: g.is_active,
    metadata: g.metadata,
    created_at: g.created_at.toISOString(),
    updated_at: g.updated_at.toISOString(),
  };
}
