import { AppModel } from './AppModel';

export type AccountTokenPurpose =
  'registration' | 'email_verification' | 'email_change' | 'email_link' | 'password_reset';

/** A one-time token of an email flow; only its sha256 is stored. */
export class AccountToken extends AppModel {
  static override tableName = 'account_tokens';
  static override jsonAttributes = ['payload'];
  id!: string;
  token_hash!: string;
  purpose!: AccountTokenPurpose;
  user_id!: string | null;
  email!: string | null;
  payload!: Record<string, unknown>;
  expires_at!: Date;
  used_at!: Date | null;
  created_at!: Date;
}
