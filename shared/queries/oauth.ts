import type { Knex } from 'knex';
import type { AuthInvalidation } from '../events';
import type { OAuthClient } from '../models/OAuthClient';
import { OAuthConsent } from '../models/OAuthConsent';

/** Whether the user's consent for the client stands (not revoked). */
export async function consentActive(db: Knex | Knex.Transaction, userId: string, clientId: string): Promise<boolean> {
  return !!(await db('oauth_consents')
    .where({ user_id: userId, client_id: clientId })
    .whereNull('revoked_at')
    .first('id'));
}

/** Whether the user exists and is not deleted. */
export async function userActive(db: Knex | Knex.Transaction, userId: string): Promise<boolean> {
  return !!(await db('users').where('id', userId).whereNull('deleted_at').first('id'));
}

/** A user's standing consents with their clients, newest first. */
export async function activeConsents(db: Knex, userId: string): Promise<Array<OAuthConsent & { client: OAuthClient }>> {
  const rows = await OAuthConsent.query(db)
    .where('oauth_consents.user_id', userId)
    .whereNull('oauth_consents.revoked_at')
    .withGraphJoined('client')
    .orderBy('oauth_consents.granted_at', 'desc');
  return rows as Array<OAuthConsent & { client: OAuthClient }>;
}

/**
 * Users holding live tokens of a client: whose cached credentials must go when the client is
 * deleted, deactivated or has its scopes narrowed. Past a few hundred users, drop everything.
 */
export async function clientTokenInvalidation(
  db: Knex | Knex.Transaction,
  clientId: string,
): Promise<AuthInvalidation[]> {
  const rows: Array<{ user_id: string }> = await db('oauth_access_tokens')
    .where('client_id', clientId)
    .whereNull('revoked_at')
    .where('expires_at', '>', db.fn.now())
    .distinct('user_id')
    .limit(201);
  if (rows.length > 200) return [{ all: true }];
  return rows.map((r) => ({ userId: r.user_id }));
}
