import { BaseModel } from './BaseModel';

/** A third-party (or first-party) application allowed to run the OAuth authorization-code flow. */
export class OAuthClient extends BaseModel {
  static override tableName = 'oauth_clients';
  static override jsonAttributes = ['redirect_uris', 'allowed_scopes'];
  id!: string;
  user_id!: string | null;
  name!: string;
  description!: string | null;
  logo_url!: string | null;
  homepage_url!: string | null;
  privacy_policy_url!: string | null;
  terms_of_service_url!: string | null;
  client_secret_hash!: string | null;
  redirect_uris!: string[];
  allowed_scopes!: string[];
  client_type!: 'public' | 'confidential';
  is_active!: boolean;
  is_first_party!: boolean;
  created_at!: Date;
  declare updated_at: Date;
}
