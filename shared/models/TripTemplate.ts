import { BaseModel } from './BaseModel';

/** Reusable trip defaults (spec §2 Trip template). */
export class TripTemplate extends BaseModel {
  static override tableName = 'trip_templates';
  id!: string;
  name!: string;
  description!: string | null;
  category_id!: string | null;
  origin_id!: string | null;
  destination_id!: string | null;
  device_id!: string | null;
  gps_logging_enabled!: boolean;
  default_weight_kg!: number | null;
  notes!: string | null;
  tags!: string[];
  created_at!: Date;
  declare updated_at: Date;
}
