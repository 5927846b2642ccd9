import { BaseModel } from './BaseModel';

/** A user's TOTP setup (pending while enabled_at is null) or enabled second factor. */
export class UserTwoFactor extends BaseModel {
  static override tableName = 'user_two_factor';
  static override idColumn = 'user_id';
  user_id!: string;
  /** encryptSecret(base32 secret, SECRETS_KEY). */
  secret_encrypted!: string;
  platform_id!: string | null;
  setup_expires_at!: Date | null;
  enabled_at!: Date | null;
  /** Newest accepted TOTP time step (bigint: read as a string). */
  last_step!: string | number | null;
  created_at!: Date;
  declare updated_at: Date;
}
