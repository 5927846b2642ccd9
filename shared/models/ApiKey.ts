import { BaseModel } from './BaseModel';

export class ApiKey extends BaseModel {
  static override tableName = 'api_keys';
  static override jsonAttributes = ['scopes'];
  id!: string;
  user_id!: string | null;
  name!: string;
  description!: string | null;
  key_hash!: string;
  key_prefix!: string;
  scopes!: string[];
  is_active!: boolean;
  /** Switched off by someone other than the owner: only an administrator may switch it back on. */
  locked!: boolean;
  is_system!: boolean;
  expires_at!: Date | null;
  last_used_at!: Date | null;
  created_at!: Date;
  declare updated_at: Date;
}
