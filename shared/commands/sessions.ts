import type { Knex } from 'knex';
import { randomToken, sha256 } from '../crypto';
import { Session } from '../models/Session';
import { SESSION_PREFIX } from '../auth/credentialSources';

export interface SessionMeta {
  ipAddress?: string | null;
  userAgent?: string | null;
  platformSlug?: string | null;
}

/** Creates a session; returns the row and the token (only its hash is stored). */
export async function createSession(userId: string, expires: Date, meta: SessionMeta = {}, trx?: Knex.Transaction): Promise<{ session: Session; token: string }> {
  const token = randomToken(SESSION_PREFIX, 32);
  const session = await Session.query(trx).insertAndFetch({
    token_hash: sha256(token),
    user_id: userId,
    expires_at: expires,
    ip_address: meta.ipAddress ?? null,
    user_agent: meta.userAgent ?? null,
    platform_slug: meta.platformSlug ?? null,
  });
  return { session, token };
}

/** Finds a live session by its raw token. */
export async function findSessionByToken(token: string): Promise<Session | undefined> {
  return Session.query().findOne({ token_hash: sha256(token) }).where('expires_at', '>', new Date());
}
