import type { Knex } from 'knex';
import { randomToken, sha256 } from '../crypto';
import { AccountToken, AccountTokenPurpose } from '../models/AccountToken';
import { insertRow } from '../models/AppModel';

/** How long each kind of emailed token stays valid. */
const TOKEN_TTL_MS: Record<AccountTokenPurpose, number> = {
  registration: 24 * 3600_000,
  email_verification: 24 * 3600_000,
  email_change: 24 * 3600_000, // spec §8: 24 hours
  email_link: 24 * 3600_000,
  password_reset: 3600_000,
};

export interface IssueTokenInput {
  purpose: AccountTokenPurpose;
  userId: string | null;
  email: string | null;
  payload?: Record<string, unknown>;
}

/**
 * Serialises, until the transaction ends, the issuers of one purpose's tokens for one user (or, for
 * registrations, one address). Each drops the open tokens before it inserts its own; two at once
 * each missed the other's uncommitted token, and every superseded link kept working (an older
 * email change or a second email sign-in for one account: the race34 audit). Key space 5 of the
 * two-key advisory locks. Only issuers take it, first in their transaction, and nothing waits for
 * it while holding something else (a claim never takes it): it adds no deadlock.
 */
async function lockTokenIssuance(trx: Knex.Transaction, purpose: AccountTokenPurpose, subject: string): Promise<void> {
  await trx.raw('SELECT pg_advisory_xact_lock(5, hashtext(?))', [`${purpose}:${subject}`]);
}

/**
 * Creates a one-time token and returns it in clear once (only its hash is stored). Earlier open
 * tokens of the same purpose for the same user (or, for registrations, the same address) are
 * dropped, so only the newest email's link works, also when the requests came at once.
 */
export async function issueAccountToken(
  trx: Knex.Transaction,
  input: IssueTokenInput,
): Promise<{ token: string; row: AccountToken }> {
  const subject = input.userId ?? input.email;
  if (subject) await lockTokenIssuance(trx, input.purpose, subject);
  // The user row before the tokens, as useEmailToken takes them (user row, then the claim): the new
  // row's foreign key would take it only after the DELETE had locked the old token, and a link used
  // meanwhile held the user and waited for that token (a deadlock, 409).
  if (input.userId) await trx('users').where('id', input.userId).forKeyShare().first('id');
  const open = AccountToken.query(trx).where('purpose', input.purpose).whereNull('used_at');
  if (input.userId) await open.where('user_id', input.userId).delete();
  else if (input.email) await open.whereNull('user_id').where('email', input.email).delete();
  const token = randomToken('', 32);
  const row = await insertRow(AccountToken, trx, {
    token_hash: sha256(token),
    purpose: input.purpose,
    user_id: input.userId,
    email: input.email,
    payload: input.payload ?? {},
    expires_at: new Date(Date.now() + TOKEN_TTL_MS[input.purpose]),
  });
  return { token, row };
}

/**
 * Claims a token for use inside `trx`: the conditional UPDATE makes a token single use even when
 * two requests race with it. Returns undefined for unknown, used, expired or wrong-purpose tokens.
 *
 * The same statement empties the stored payload: what a flow applies (a registration's or an email
 * link's argon2 password hash, the username and locale chosen at registration, the new address of
 * an email change, the account of a reset) is needed only now, and the used row stays until a day
 * past its expiry. The row returned carries the payload as it was, for the caller to apply. A
 * transaction that fails after the claim rolls both back: the token can be used again.
 */
export async function claimAccountToken(
  trx: Knex.Transaction,
  token: string,
  purposes: AccountTokenPurpose[],
): Promise<AccountToken | undefined> {
  // The CTE locks the row and reads the payload before the UPDATE empties it (RETURNING gives the
  // new values). Of two concurrent claims, the second waits for the row, sees it used and gets none.
  const { rows } = (await trx.raw(
    `WITH claimed AS (
       SELECT id, payload FROM account_tokens
        WHERE token_hash = ? AND purpose = ANY(?) AND used_at IS NULL AND expires_at > ?
        FOR UPDATE
     )
     UPDATE account_tokens AS t SET used_at = ?, payload = '{}'::jsonb
       FROM claimed
      WHERE t.id = claimed.id
     RETURNING t.id, t.token_hash, t.purpose, t.user_id, t.email, claimed.payload, t.expires_at, t.used_at, t.created_at`,
    [sha256(token), purposes, new Date(), new Date()],
  )) as { rows: Array<Record<string, unknown>> };
  return rows.length ? (AccountToken.fromDatabaseJson(rows[0]) as AccountToken) : undefined;
}

/**
 * Drops every open token of a purpose for a user; returns how many were pending (unexpired). One
 * statement, counted from what it deleted: a token claimed while this ran (the change applied)
 * is not deleted, and not counted as cancelled either.
 */
export async function cancelAccountTokens(
  db: Knex | Knex.Transaction,
  userId: string,
  purpose: AccountTokenPurpose,
): Promise<number> {
  const deleted: Array<{ expires_at: Date }> = await db('account_tokens')
    .where({ user_id: userId, purpose })
    .whereNull('used_at')
    .delete()
    .returning('expires_at');
  const now = Date.now();
  return deleted.filter((t) => new Date(t.expires_at).getTime() > now).length;
}
