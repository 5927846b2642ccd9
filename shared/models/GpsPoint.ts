import { AppModel } from './AppModel';

/** One GPS fix (spec §2 GPS point). Written on the hot path with plain knex, read through this model. */
export class GpsPoint extends AppModel {
  static override tableName = 'gps_points';
  id!: string;
  device_id!: string | null;
  trip_id!: string | null;
  latitude!: number;
  longitude!: number;
  altitude!: number | null;
  heading!: number | null;
  timestamp!: Date;
  speed_kmh!: number;
  speed_mps!: number;
  speed_mph!: number;
  speed_knots!: number;
  pdop!: number | null;
  hdop!: number | null;
  vdop!: number | null;
  created_at!: Date;
}
