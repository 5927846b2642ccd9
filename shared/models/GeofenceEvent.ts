import { AppModel } from './AppModel';

/** One enter or exit of a device at a geofence, as the geofence worker published it. */
export class GeofenceEvent extends AppModel {
  static override tableName = 'geofence_events';
  id!: string;
  geofence_id!: string;
  device_id!: string | null;
  event!: 'enter' | 'exit';
  distance_km!: number;
  latitude!: number;
  longitude!: number;
  gps_point_id!: string | null;
  occurred_at!: Date;
  created_at!: Date;
}
