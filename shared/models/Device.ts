import { BaseModel } from './BaseModel';

/** A tracking device (spec §2 Device); `api_key_id` is the tracker's own API key, if linked. */
export class Device extends BaseModel {
  static override tableName = 'devices';
  id!: string;
  name!: string;
  description!: string | null;
  device_type!: string | null;
  is_active!: boolean;
  api_key_id!: string | null;
  created_at!: Date;
  declare updated_at: Date;
}
