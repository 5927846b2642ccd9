import type { Knex } from 'knex';
import { sha256 } from '../crypto';
import { AccountToken, AccountTokenPurpose } from '../models/AccountToken';

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

/** The newest open token of a purpose for a user (the "pending" state of email change / link). */
export async function pendingAccountToken(
  db: Knex,
  userId: string,
  purpose: AccountTokenPurpose,
): Promise<AccountToken | undefined> {
  return AccountToken.query(db)
    .where({ user_id: userId, purpose })
    .whereNull('used_at')
    .where('expires_at', '>', new Date())
    .orderBy('created_at', 'desc')
    .first();
}
