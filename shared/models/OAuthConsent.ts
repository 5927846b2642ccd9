import { Model } from 'objection';
import { AppModel } from './AppModel';
import { OAuthClient } from './OAuthClient';

/** A user's grant of scopes to an OAuth client; revoked_at set when the user withdraws it. */
export class OAuthConsent extends AppModel {
  static override tableName = 'oauth_consents';
  static override jsonAttributes = ['scopes'];
  id!: string;
  user_id!: string;
  client_id!: string;
  scopes!: string[];
  granted_at!: Date;
  updated_at!: Date;
  revoked_at!: Date | null;

  client?: OAuthClient;

  static override get relationMappings() {
    return {
      client: {
        relation: Model.BelongsToOneRelation,
        modelClass: OAuthClient,
        join: { from: 'oauth_consents.client_id', to: 'oauth_clients.id' },
      },
    };
  }
}
