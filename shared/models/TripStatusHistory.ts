import { AppModel } from './AppModel';
import type { TripStatus } from './Trip';

/** One status change of a trip (spec §2 Trip status history entry). */
export class TripStatusHistory extends AppModel {
  static override tableName = 'trip_status_history';
  id!: string;
  trip_id!: string;
  old_status!: TripStatus;
  new_status!: TripStatus;
  changed_by!: string | null;
  latitude!: number | null;
  longitude!: number | null;
  changed_at!: Date;
}
