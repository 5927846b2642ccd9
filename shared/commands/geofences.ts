import type { Knex } from 'knex';
import { notFound } from '../errors';
import { Geofence } from '../models/Geofence';
import { insertGrouped } from '../groupedInsert';

/** Fields of POST/PATCH /v1/geofences. */
export interface GeofenceInput {
  name?: string;
  description?: string | null;
  latitude?: number;
  longitude?: number;
  radius_km?: number;
  metadata?: Record<string, unknown> | null;
  is_active?: boolean;
  min_dwell_seconds?: number;
}

/** Creates a circular geofence; the geofence worker evaluates it from the next GPS point on. */
export async function createGeofence(
  db: Knex,
  input: GeofenceInput & Pick<Geofence, 'name' | 'latitude' | 'longitude' | 'radius_km'>,
): Promise<Geofence> {
  return insertGrouped(Geofence, db, input);
}

/** Patches a geofence the caller loaded. */
export async function updateGeofence(db: Knex, geofence: Geofence, input: GeofenceInput): Promise<Geofence> {
  return geofence.$query(db).patchAndFetch(input);
}

/** Deletes a geofence (404 when there is none). */
export async function deleteGeofence(db: Knex, id: string): Promise<void> {
  const n = await Geofence.query(db).deleteById(id);
  if (!n) throw notFound('geofence');
}
