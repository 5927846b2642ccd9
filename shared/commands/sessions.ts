import type { Knex } from 'knex';
import { attributed, Attribution, recordAuditEvent, writeAudited } from '../audit';
import { SESSION_PREFIX } from '../auth/credentialSources';
import type { ServiceContext } from '../context';
import { randomToken, sha256 } from '../crypto';
import { afterCommit, runCommitted, transaction } from '../db';
import { badRequest, forbidden, notFound, unauthorized } from '../errors';
import { Platform } from '../models/Platform';
import { Session } from '../models/Session';
import { User } from '../models/User';
import { findAnySessionByToken } from '../queries/sessions';
import { insertGrouped } from '../groupedInsert';
import { rowBy, rowById, turnBatcherByDb } from '../rowLoader';
import { invalidateCredentials } from './accessChanges';
import { insertRow } from '../models/AppModel';

/** Where a session is opened from: the request's attribution and the platform signed in with. */
export interface SessionMeta extends Partial<Attribution> {
  platformSlug?: string | null;
}

/** Why a session of the user's own list ends when they revoke it. */
const REVOKED_BY_USER = 'revoked_by_user';

/** Creates a session; returns the row and the token (only its hash is stored). */
export async function createSession(
  db: Knex | Knex.Transaction,
  userId: string,
  expires: Date,
  meta: SessionMeta = {},
): Promise<{ session: Session; token: string }> {
  const token = randomToken(SESSION_PREFIX, 32);
  const row = {
    token_hash: sha256(token),
    user_id: userId,
    expires_at: expires,
    ip_address: meta.ipAddress ?? null,
    user_agent: meta.userAgent ?? null,
    platform_slug: meta.platformSlug ?? null,
  };
  // Outside a transaction the INSERT is shared with the sessions opened meanwhile (insertGrouped).
  const session = (db as Knex.Transaction).isTransaction
    ? await insertRow(Session, db, row)
    : await insertGrouped(Session, db, row);
  return { session, token };
}

/** Whether each user asked for in one turn is deleted or banned now: one statement. */
const sessionBlockerInTurn = turnBatcherByDb(async (db, userIds) => {
  const { rows } = await db.raw<{ rows: Array<{ user_id: string; deleted: boolean; banned: boolean }> }>(
    `SELECT k.id AS user_id,
            coalesce((SELECT u.deleted_at IS NOT NULL FROM users u WHERE u.id = k.id), true) AS deleted,
            EXISTS (SELECT 1 FROM bans b WHERE b.user_id = k.id AND b.unbanned_at IS NULL
                       AND (b.expires_at IS NULL OR b.expires_at > now())) AS banned
       FROM unnest(?::uuid[]) AS k(id)`,
    [userIds],
  );
  return new Map(rows.map((r) => [r.user_id, r]));
});

/** The platform slug of each user's most recently updated platform account, batched per turn. */
const latestPlatforms = turnBatcherByDb(async (db, userIds) => {
  const { rows } = await db.raw<{ rows: Array<{ user_id: string; slug: string }> }>(
    `SELECT DISTINCT ON (pa.user_id) pa.user_id, p.slug
       FROM platform_accounts pa JOIN platforms p ON p.id = pa.platform_id
      WHERE pa.user_id = ANY(?::uuid[])
      ORDER BY pa.user_id, pa.updated_at DESC, pa.id`,
    [userIds],
  );
  return new Map(rows.map((r) => [r.user_id, r.slug]));
});
/**
 * An internal session for the first-party web app (POST /v1/sessions): a live user, a future expiry.
 * Its provider is the platform named (which must exist), or else the platform of the user's most
 * recently used platform account: a provider sign-in (POST /v1/users/oauth) updates its account
 * just before the web app asks for the session.
 */
export async function createInternalSession(
  ctx: ServiceContext,
  userId: string,
  expires: Date,
  by: Attribution,
  provider?: string,
): Promise<{ session: Session; token: string }> {
  if (expires.getTime() <= Date.now()) throw badRequest('expires: must be in the future');
  // The batched read by id (rowById), so concurrent sign-ins share it.
  const user = await rowById(User, ctx.db).load(userId);
  if (!user || user.deleted_at) throw badRequest('userId: no such user');
  let platformSlug: string | undefined;
  if (provider !== undefined) {
    if (!(await rowBy(Platform, 'slug', ctx.db).load(provider)))
      throw badRequest(`provider: unknown platform '${provider}'`);
    platformSlug = provider;
  } else platformSlug = await latestPlatforms(ctx.db, user.id);
  const created = await createSession(ctx.db, user.id, expires, { ...by, platformSlug });
  // Checked again once the session is committed, and taken back if the account was banned or
  // deleted meanwhile. A ban, a deletion and a password reset lock the user's row (FOR UPDATE)
  // before they end the user's sessions, and the INSERT's foreign key check waits for that lock:
  // one under way when the session was written has committed by now and is seen here, and one that
  // starts later ends this session with the others. (Checked only before, a session written just
  // after the ban ended the others outlived it: it worked again after the unban.)
  const blocker = await sessionBlockerInTurn(ctx.db, user.id);
  if (blocker?.deleted || blocker?.banned) {
    await ctx.db('sessions').where('id', created.session.id).delete();
    throw blocker.deleted ? badRequest('userId: no such user') : forbidden('userId: the account is banned');
  }
  // Outside a transaction: the buffered writer records it without a round trip of its own.
  ctx.audit.record(
    attributed(by, {
      user_id: user.id,
      event_type: 'session_created',
      resource_type: 'session',
      resource_id: created.session.id,
      metadata: { session_id: created.session.id, kind: 'internal', expires_at: expires.toISOString() },
    }),
  );
  return created;
}

/** Deletes a user's sessions (all, or all but one) inside `trx`; returns the deleted ids. */
export async function deleteUserSessions(
  trx: Knex | Knex.Transaction,
  userId: string,
  exceptSessionId?: string | null,
): Promise<string[]> {
  const q = Session.query(trx).where('user_id', userId);
  if (exceptSessionId) q.whereNot('id', exceptSessionId);
  const rows = (await q.delete().returning('id')) as unknown as Array<{ id: string }>;
  return rows.map((r) => r.id);
}

/** After the commit: drop cached credentials everywhere and tell clients each session ended. */
export async function announceSessionsRevoked(
  ctx: ServiceContext,
  userId: string,
  sessionIds: string[],
  reason: string,
): Promise<void> {
  await invalidateCredentials(ctx, { userIds: [userId] });
  const timestamp = new Date().toISOString();
  await ctx.bus.publishMany(
    sessionIds.map((sessionId) => ({
      channel: `user:${userId}`,
      message: { type: 'sessionRevoked', userId, sessionId, reason, timestamp },
    })),
  );
}

/** The `session_revoked` audit event of a user ending their own sessions. */
function revocation(userId: string, sessionIds: string[], by: Attribution) {
  return attributed(by, {
    user_id: userId,
    event_type: 'session_revoked',
    resource_type: 'session',
    resource_id: sessionIds.length === 1 ? sessionIds[0] : null,
    metadata: { reason: REVOKED_BY_USER, session_ids: sessionIds },
  });
}

/**
 * Takes a user's turn at ending their own sessions (the user's row lock) and checks that the
 * caller's session still exists: of two sessions ending each other at once, the second finds its
 * own session ended (401), as it would one after the other, instead of both answering 200 and
 * leaving the user signed out everywhere.
 */
async function ownSessionTurn(trx: Knex.Transaction, userId: string, currentSessionId: string): Promise<void> {
  await trx('users').where('id', userId).forNoKeyUpdate().first('id');
  if (!(await trx('sessions').where({ id: currentSessionId, user_id: userId }).first('id')))
    throw unauthorized('this session has ended; sign in again');
}

/** A user revokes one of their other sessions (never the current one: they sign out instead). */
export async function revokeOwnSession(
  ctx: ServiceContext,
  userId: string,
  currentSessionId: string,
  sessionId: string,
  by: Attribution,
): Promise<void> {
  if (sessionId === currentSessionId)
    throw badRequest('cannot revoke the current session; sign out instead', { success: false });
  await transaction(ctx.db, async (trx) => {
    await ownSessionTurn(trx, userId, currentSessionId);
    // The delete and its event in one statement (writeAudited), then the announcement.
    const deleted = await writeAudited(
      trx,
      trx('sessions').where({ id: sessionId, user_id: userId }).delete().returning('id'),
      revocation(userId, [sessionId], by),
    );
    if (deleted.length === 0) throw notFound('session');
    afterCommit(trx, () => announceSessionsRevoked(ctx, userId, [sessionId], REVOKED_BY_USER));
  });
}

/** A user revokes every session but the current one; returns the revoked ids. */
export async function revokeOtherSessions(
  ctx: ServiceContext,
  userId: string,
  currentSessionId: string,
  by: Attribution,
): Promise<string[]> {
  return transaction(ctx.db, async (trx) => {
    await ownSessionTurn(trx, userId, currentSessionId);
    const ids = await deleteUserSessions(trx, userId, currentSessionId);
    if (ids.length) {
      await recordAuditEvent(revocation(userId, ids, by), trx);
      afterCommit(trx, () => announceSessionsRevoked(ctx, userId, ids, REVOKED_BY_USER));
    }
    return ids;
  });
}

/**
 * Logout of an internal session (DELETE /v1/sessions/{token}): the `logout` event names the
 * session's user as actor (the web app relays their sign-out); after the commit every instance
 * drops the cached credential and the user's clients hear of it.
 */
export async function endSession(
  ctx: ServiceContext,
  token: string,
  input: { reason: string; app: string | null },
  by: Attribution,
): Promise<void> {
  const session = await findAnySessionByToken(ctx.db, token);
  if (!session) throw notFound('session');
  const userId = session.user_id;
  // The delete and its `logout` event in one statement (writeAudited): no transaction needed.
  const deleted = await writeAudited(
    ctx.db,
    ctx.db('sessions').where('id', session.id).delete().returning('id'),
    attributed(
      { ...by, actorId: userId },
      {
        user_id: userId,
        event_type: 'logout',
        resource_type: 'session',
        resource_id: session.id,
        metadata: { reason: input.reason, session_id: session.id, app: input.app },
        source_service: 'api',
      },
    ),
  );
  // Ended meanwhile by another request: that one recorded and announced it.
  if (deleted.length === 0) throw notFound('session');
  await runCommitted(async () => {
    await invalidateCredentials(ctx, { userIds: [userId] });
    await ctx.bus.publishToUser(userId, {
      type: 'sessionRevoked',
      userId,
      sessionId: session.id,
      reason: input.reason,
      timestamp: new Date().toISOString(),
    });
  });
}
