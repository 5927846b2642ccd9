import type { Knex } from 'knex';
import type { AuthInvalidation } from '../events';
import { OAuthClient } from '../models/OAuthClient';
import { OAuthConsent } from '../models/OAuthConsent';
import { compiledOnce, groupBy, rowsBy, turnBatcherByDb, withoutColumns } from '../rowLoader';

/**
 * Whether the user's consent for the client stands, for a transaction about to issue tokens under
 * it: the row is locked FOR SHARE until the commit. A revocation (which
 * updates the row first) then either waits for the tokens to commit and revokes them with its next
 * statement, or has already committed, and this finds the consent revoked. Without the lock a
 * token committed just after the revocation's UPDATE of the tokens would outlive it.
 */
export async function lockActiveConsent(
  trx: Knex.Transaction,
  userId: string,
  clientId: string,
  /** The code being exchanged: the consent must still be the grant it was issued under. */
  codeId?: string,
): Promise<boolean> {
  const q = trx('oauth_consents as c')
    .where({ 'c.user_id': userId, 'c.client_id': clientId })
    .whereNull('c.revoked_at')
    .forShare('c')
    .first('c.id');
  // Compared in SQL, at the database's precision: a revoked grant's code after a new grant is refused.
  if (codeId)
    q.whereExists(
      trx('oauth_authorization_codes as a')
        .where('a.id', codeId)
        .where((w) => w.whereNull('a.consent_granted_at').orWhereRaw('a.consent_granted_at = c.granted_at'))
        .select(trx.raw('1')),
    );
  return !!(await q);
}

/**
 * Locks the client row FOR KEY SHARE, first in a transaction that issues tokens for it, and returns
 * its allowed scopes (null when the client is gone). A client deletion (which locks the row, then
 * cascades to codes, tokens and consents) and a grant (which claimed a code or refresh token, then
 * inserted tokens referencing the client) took their locks in opposite orders and deadlocked; now
 * one waits for the other. A change of the client's scopes does not wait: the scopes a token holds
 * are narrowed again by the client's current ones wherever it is read (loadOAuthTokenEntry).
 */
export async function lockClientForGrant(trx: Knex.Transaction, clientId: string): Promise<string[] | null> {
  const row = await trx('oauth_clients').where('id', clientId).forKeyShare().first('allowed_scopes');
  return row ? (row.allowed_scopes as string[]) : null;
}

/** Whether the user exists and is not deleted. */
export async function userActive(db: Knex | Knex.Transaction, userId: string): Promise<boolean> {
  return !!(await db('users').where('id', userId).whereNull('deleted_at').first('id'));
}

/** A standing consent with what its list shows of the client. */
export type ConsentWithClient = Omit<OAuthConsent, 'client'> & {
  client: Pick<OAuthClient, 'name' | 'description' | 'logo_url' | 'homepage_url' | 'is_first_party'>;
};

/** The client columns a consent list shows, as the statement names them. */
const CLIENT_COLUMNS = ['name', 'description', 'logo_url', 'homepage_url', 'is_first_party'] as const;
const CLIENT_ALIASES: ReadonlySet<string> = new Set(CLIENT_COLUMNS.map((c) => `_client_${c}`));

/**
 * The standing consents of every user asked for in one turn, each with its client (joined): one
 * statement, compiled once. A consent's client is a foreign key (ON DELETE CASCADE), so the join
 * drops nothing but consents deleted with their client.
 */
const consentsSql = compiledOnce((db) =>
  db('oauth_consents as c')
    .join('oauth_clients as oc', 'oc.id', 'c.client_id')
    .select('c.*', ...CLIENT_COLUMNS.map((col) => `oc.${col} as _client_${col}`))
    .whereRaw('c.user_id = ANY(?)', [[]])
    .whereNull('c.revoked_at')
    .orderBy([
      { column: 'c.granted_at', order: 'desc' },
      { column: 'c.id', order: 'asc' },
    ]),
);
const consentsInTurn = turnBatcherByDb(async (db, userIds) => {
  const { rows } = await db.raw<{ rows: Array<Record<string, unknown>> }>(consentsSql(db), [userIds]);
  return groupBy(
    rows,
    (r) => String(r.user_id),
    (r): ConsentWithClient => {
      const consent = OAuthConsent.fromDatabaseJson(withoutColumns(r, CLIENT_ALIASES)) as ConsentWithClient;
      consent.client = {
        name: r._client_name as string,
        description: r._client_description as string | null,
        logo_url: r._client_logo_url as string | null,
        homepage_url: r._client_homepage_url as string | null,
        is_first_party: r._client_is_first_party as boolean,
      };
      return consent;
    },
  );
});

/** A user's standing consents with their clients, newest first (one batched statement). */
export async function activeConsents(db: Knex, userId: string): Promise<ConsentWithClient[]> {
  return (await consentsInTurn(db, userId)) ?? [];
}

/** A user's own OAuth clients, newest first; concurrent requests share one statement per turn. */
export function ownedClients(db: Knex): { load(userId: string): Promise<OAuthClient[]> } {
  return rowsBy(OAuthClient, 'user_id', [['created_at', 'desc']], db);
}

/** Past this many users holding a client's tokens, an invalidation drops every cached credential. */
const CLIENT_USERS_NAMED = 10_000;

/**
 * Users holding live tokens of a client: whose cached credentials must go when the client is
 * deleted, deactivated or has its scopes narrowed (null: nobody). Past CLIENT_USERS_NAMED users,
 * drop everything.
 */
export async function clientTokenInvalidation(
  db: Knex | Knex.Transaction,
  clientId: string,
): Promise<AuthInvalidation | null> {
  const rows: Array<{ user_id: string }> = await db('oauth_access_tokens')
    .where('client_id', clientId)
    .whereNull('revoked_at')
    .where('expires_at', '>', db.fn.now())
    .distinct('user_id')
    .limit(CLIENT_USERS_NAMED + 1);
  if (rows.length > CLIENT_USERS_NAMED) return { all: true };
  return rows.length ? { userIds: rows.map((r) => r.user_id) } : null;
}
