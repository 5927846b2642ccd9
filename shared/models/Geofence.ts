import { BaseModel } from './BaseModel';

/** A circular geofence (spec §2 Geofence); metadata is any JSON object, echoed in geofenceEvent. */
export class Geofence extends BaseModel {
  static override tableName = 'geofences';
  static override jsonAttributes = ['metadata'];
  id!: string;
  name!: string;
  description!: string | null;
  latitude!: number;
  longitude!: number;
  radius_km!: number;
  is_active!: boolean;
  metadata!: Record<string, unknown> | null;
  /** How long (GPS time) a new inside/outside state must hold before an enter/exit counts. */
  min_dwell_seconds!: number;
  created_at!: Date;
  declare updated_at: Date;
}
