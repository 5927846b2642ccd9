import type { Knex } from 'knex';
import { notFound } from '../errors';
import { Geofence } from '../models/Geofence';
import { insertGrouped } from '../groupedInsert';
import { deleteById, patchLoaded } from '../models/AppModel';

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
  return patchLoaded(geofence, db, input, 'geofence');
}

/** Deletes a geofence (404 when there is none). */
export async function deleteGeofence(db: Knex, id: string): Promise<void> {
  const n = await deleteById(Geofence, db, id);
  if (!n) throw notFound('geofence');
}
