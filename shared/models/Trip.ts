import { BaseModel } from './BaseModel';

export type TripStatus = 'draft' | 'active' | 'paused' | 'completed';

/** A trip with its status lifecycle (spec §2 Trip, §3 Trip status). */
export class Trip extends BaseModel {
  static override tableName = 'trips';
  id!: string;
  name!: string;
  description!: string | null;
  status!: TripStatus;
  gps_logging_enabled!: boolean;
  device_id!: string | null;
  category_id!: string | null;
  origin_id!: string | null;
  destination_id!: string | null;
  weight_kg!: number | null;
  notes!: string | null;
  tags!: string[];
  start_latitude!: number | null;
  start_longitude!: number | null;
  end_latitude!: number | null;
  end_longitude!: number | null;
  started_at!: Date | null;
  ended_at!: Date | null;
  created_at!: Date;
  declare updated_at: Date;
}
