import type { Knex } from 'knex';
import { sha256 } from '../crypto';
import { AccountToken, AccountTokenPurpose } from '../models/AccountToken';
import { latestOfUser, type LatestOfUser } from './users';

/** The pending-token read of each purpose (a handful), made on first use. */
const pendingReads = new Map<AccountTokenPurpose, LatestOfUser<AccountToken>>();

/** Reads a usable token without claiming it (to check who it belongs to before acting). */
export async function peekAccountToken(
  db: Knex,
  token: string,
  purposes: AccountTokenPurpose[],
): Promise<AccountToken | undefined> {
  return AccountToken.query(db)
    .where('token_hash', sha256(token))
    .whereIn('purpose', purposes)
    .whereNull('used_at')
    .where('expires_at', '>', new Date())
    .first();
}

/**
 * The newest open token of a purpose for a live user (the "pending" state of email change / link),
 * in one statement with the user: undefined when there is no live user, `{ row: undefined }` when
 * nothing is pending.
 */
export async function pendingAccountToken(
  db: Knex,
  userId: string,
  purpose: AccountTokenPurpose,
): Promise<{ row: AccountToken | undefined } | undefined> {
  let read = pendingReads.get(purpose);
  if (!read) {
    read = latestOfUser(AccountToken, (q, knex) =>
      q
        .where('account_tokens.purpose', purpose)
        .whereNull('account_tokens.used_at')
        // The database's clock, so every call has the same statement and the reads batch.
        .where('account_tokens.expires_at', '>', knex.fn.now())
        .orderBy('account_tokens.created_at', 'desc'),
    );
    pendingReads.set(purpose, read);
  }
  return read(db, userId);
}
