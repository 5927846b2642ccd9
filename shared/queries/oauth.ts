import type { Knex } from 'knex';
import type { AuthInvalidation } from '../events';
import { OAuthClient } from '../models/OAuthClient';
import { OAuthConsent } from '../models/OAuthConsent';
import { rowById, rowsBy } from '../rowLoader';

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
  // Two batched reads (the user's consents, then their clients by id): concurrent requests share both.
  const consents = (await rowsBy(OAuthConsent, 'user_id', [['granted_at', 'desc']], db).load(userId)).filter(
    (c) => c.revoked_at === null,
  );
  const clients = rowById(OAuthClient, db);
  const withClients = await Promise.all(
    consents.map(async (c) =>
      // A shallow copy (the rows may be shared by the turn's callers); objection's $clone is deep and slow.
      Object.assign(Object.create(Object.getPrototypeOf(c) as object) as OAuthConsent, c, {
        client: await clients.load(c.client_id),
      }),
    ),
  );
  // A consent's client is a foreign key (ON DELETE CASCADE): present unless deleted meanwhile.
  return withClients.filter((c): c is OAuthConsent & { client: OAuthClient } => c.client !== undefined);
}

/** A user's own OAuth clients, newest first; concurrent requests share one statement per turn. */
export function ownedClients(db: Knex): { load(userId: string): Promise<OAuthClient[]> } {
  return rowsBy(OAuthClient, 'user_id', [['created_at', 'desc']], db);
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
