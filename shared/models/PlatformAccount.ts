import { Model } from 'objection';
import { BaseModel } from './BaseModel';
import { Platform } from './Platform';

export class PlatformAccount extends BaseModel {
  static override tableName = 'platform_accounts';
  id!: string;
  user_id!: string;
  platform_id!: string;
  platform_user_id!: string;
  is_oauth!: boolean;
  is_primary!: boolean;
  username!: string | null;
  email!: string | null;
  avatar_url!: string | null;
  password_hash!: string | null;
  email_verified_at!: Date | null;
  created_at!: Date;
  declare updated_at: Date;

  platform?: Platform;

  static override get relationMappings() {
    return {
      platform: {
        relation: Model.BelongsToOneRelation,
        modelClass: Platform,
        join: { from: 'platform_accounts.platform_id', to: 'platforms.id' },
      },
    };
  }
}
