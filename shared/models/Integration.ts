import { BaseModel } from './BaseModel';

export type BotStatus = 'active' | 'paused' | 'disabled';

/** A user's connection to a stream platform account (spec §2 Integration). Tokens only sealed. */
export class Integration extends BaseModel {
  static override tableName = 'integrations';
  static override jsonAttributes = ['scopes'];
  id!: string;
  user_id!: string;
  platform_slug!: string;
  platform_user_id!: string;
  username!: string;
  display_name!: string | null;
  profile_image_url!: string | null;
  scopes!: string[];
  /** encryptSecret() output; never presented, never logged. */
  access_token_sealed!: string;
  refresh_token_sealed!: string | null;
  token_expires_at!: Date | null;
  is_active!: boolean;
  bot_status!: BotStatus;
  connected_at!: Date;
  last_refreshed_at!: Date | null;
  created_at!: Date;
  declare updated_at: Date;
}
