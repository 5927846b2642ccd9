import type { ServiceContext } from '../context';
import { badRequest, conflict, notFound } from '../errors';
import { Ban } from '../models/Ban';
import { User } from '../models/User';
import { findActiveBan } from '../queries/access';
import { emailInUse, lockEmailAddress } from '../queries/users';
import { deletionGraceMs } from '../queries/accountSettings';
import { attributed, Attribution, recordAuditEvent, recordAuditEvents } from '../audit';
import { afterCommit, transaction } from '../db';
import { invalidateCredentials } from './accessChanges';
import { holdsEverything, keepAnAdministrator } from './lastAdministrator';
import { revokeOAuthGrants } from './oauthProvider';
import { announceSessionsRevoked, deleteUserSessions } from './sessions';
import { insertRow, patchFound } from '../models/AppModel';

const now = () => new Date().toISOString();

/** After the commit: every credential of the user is dropped and every client must sign out. */
async function announceForcedLogout(ctx: ServiceContext, userId: string, reason: string): Promise<void> {
  await invalidateCredentials(ctx, { userIds: [userId] });
  await ctx.bus.publishToUser(userId, { type: 'forceLogout', userId, reason, timestamp: now() });
}

/**
 * Bans a user (permanent without a duration). Their sessions end and cached credentials are
 * dropped at once on every instance; accountBanned and forceLogout go to the user's channel.
 */
export async function banUser(
  ctx: ServiceContext,
  input: { userId: string; reason: string | null; durationSeconds: number | null },
  actor: Attribution,
): Promise<Ban> {
  if (actor.actorId === input.userId) throw badRequest('you cannot ban yourself');
  const { ban, sessionIds } = await transaction(ctx.db, async (trx) => {
    // Serialises concurrent bans of the same user, so only one active ban can exist.
    await trx('users').where('id', input.userId).forUpdate().first('id');
    if (await findActiveBan(trx, input.userId)) throw conflict('user is already banned; unban first to change the ban');
    const expiresAt = input.durationSeconds ? new Date(Date.now() + input.durationSeconds * 1000) : null;
    const ban = await insertRow(Ban, trx, {
      user_id: input.userId,
      reason: input.reason,
      banned_by: actor.actorId,
      banned_at: new Date(),
      expires_at: expiresAt,
      is_permanent: !expiresAt,
    });
    // A banned administrator administers nothing: two banning each other at once leave one.
    if (await holdsEverything(trx, input.userId)) await keepAnAdministrator(trx);
    const sessionIds = await deleteUserSessions(trx, input.userId);
    await recordAuditEvent(
      attributed(actor, {
        user_id: input.userId,
        event_type: 'user_updated',
        resource_type: 'ban',
        resource_id: ban.id,
        description: 'user banned',
        metadata: {
          action: 'banned',
          reason: input.reason,
          expires_at: expiresAt?.toISOString() ?? null,
          revoked_sessions: sessionIds.length,
        },
      }),
      trx,
    );
    afterCommit(trx, async () => {
      await invalidateCredentials(ctx, { userIds: [input.userId] });
      await ctx.bus.publishToUser(input.userId, {
        type: 'accountBanned',
        userId: input.userId,
        reason: ban.reason,
        expiresAt: ban.expires_at ? ban.expires_at.toISOString() : null,
        isPermanent: ban.is_permanent,
        timestamp: now(),
      });
      await announceForcedLogout(ctx, input.userId, 'account_banned');
    });
    return { ban, sessionIds };
  });
  ctx.logger.info({ userId: input.userId, banId: ban.id, sessions: sessionIds.length }, 'user banned');
  return ban;
}

/** Ends the active ban (history keeps unbanned_at / unbanned_by); 404 when there is none. */
export async function unbanUser(ctx: ServiceContext, userId: string, actor: Attribution): Promise<Ban> {
  return transaction(ctx.db, async (trx) => {
    // Serialises with bans and other unbans of the user: of two concurrent unbans one ends the ban
    // (one audit event, one unbanned_by) and the other finds none.
    await trx('users').where('id', userId).forUpdate().first('id');
    const active = await findActiveBan(trx, userId);
    if (!active) throw notFound('active ban');
    const ban = await patchFound(
      Ban,
      trx,
      active.id,
      { unbanned_at: new Date(), unbanned_by: actor.actorId },
      'active ban',
    );
    await recordAuditEvent(
      attributed(actor, {
        user_id: userId,
        event_type: 'user_updated',
        resource_type: 'ban',
        resource_id: ban.id,
        description: 'user unbanned',
        metadata: { action: 'unbanned' },
      }),
      trx,
    );
    afterCommit(trx, () => invalidateCredentials(ctx, { userIds: [userId] }));
    return ban;
  });
}

/**
 * Scheduled task: timed bans whose expires_at has passed are closed (unbanned_at = expires_at,
 * unbanned_by null). Credentials already work again at expires_at (the credential check compares
 * the time); this keeps the history and the "active ban" view exact, and records a `user_updated`
 * audit event (action `ban_expired`, no actor) per ban, pushed to the admin:audit feed. The user's
 * own clients were signed out by the ban and get nothing: they learn by signing in again.
 */
export async function expireBans(ctx: ServiceContext): Promise<{ ended: number }> {
  const rows = await transaction(ctx.db, async (trx) => {
    const rows: Array<{ id: string; user_id: string }> = await trx('bans')
      .whereNull('unbanned_at')
      .whereNotNull('expires_at')
      .where('expires_at', '<=', trx.fn.now())
      .update({ unbanned_at: trx.ref('expires_at') })
      .returning(['id', 'user_id']);
    // One audit event per ended ban, by the system; the outbox pushes each as auditEvent on admin:audit.
    await recordAuditEvents(
      rows.map((r) =>
        attributed(
          { actorId: null },
          {
            user_id: r.user_id,
            event_type: 'user_updated',
            resource_type: 'ban',
            resource_id: r.id,
            description: 'timed ban expired',
            metadata: { action: 'ban_expired' },
          },
        ),
      ),
      trx,
    );
    afterCommit(trx, async () => {
      await invalidateCredentials(ctx, { userIds: [...new Set(rows.map((r) => r.user_id))] });
    });
    return rows;
  });
  if (rows.length) ctx.logger.info({ bans: rows.map((r) => r.id) }, 'timed bans ended');
  return { ended: rows.length };
}

/**
 * Self-service deletion: the account is scheduled for deletion after the grace period (7 days by
 * default) and stays usable until then; an administrator can cancel or force it.
 */
export async function scheduleDeletion(ctx: ServiceContext, userId: string, actor: Attribution): Promise<Date> {
  const at = new Date(Date.now() + (await deletionGraceMs(ctx.db)));
  return transaction(ctx.db, async (trx) => {
    const user = await User.query(trx).findById(userId).forUpdate();
    if (!user) throw notFound('user');
    if (user.scheduled_deletion_at) return user.scheduled_deletion_at;
    await User.query(trx).patch({ scheduled_deletion_at: at }).where('id', userId);
    if (await holdsEverything(trx, userId)) await keepAnAdministrator(trx);
    await recordAuditEvent(
      attributed(actor, {
        user_id: userId,
        event_type: 'user_updated',
        resource_type: 'user',
        resource_id: userId,
        description: 'account deletion scheduled',
        metadata: { action: 'deletion_scheduled', scheduled_deletion_at: at.toISOString() },
      }),
      trx,
    );
    return at;
  });
}

/**
 * Soft delete (spec §3): deleted_at set, every session deleted, every API key deactivated and every
 * OAuth grant revoked (access and refresh tokens, pending codes, consents) at once, and the account
 * scheduled for the purge after the grace period. Cancel-deletion restores the account, none of its
 * credentials: the user signs in again, and OAuth clients must be authorized again.
 */
export async function softDeleteUser(
  ctx: ServiceContext,
  userId: string,
  actor: Attribution & { reason?: string },
): Promise<void> {
  const grace = await deletionGraceMs(ctx.db);
  await transaction(ctx.db, async (trx) => {
    const user = await User.query(trx).findById(userId).forUpdate();
    if (!user) throw notFound('user');
    if (user.deleted_at) throw conflict('user is already deleted');
    await User.query(trx)
      .patch({
        deleted_at: new Date(),
        scheduled_deletion_at: user.scheduled_deletion_at ?? new Date(Date.now() + grace),
      })
      .where('id', userId);
    if (await holdsEverything(trx, userId)) await keepAnAdministrator(trx);
    const sessionIds = await deleteUserSessions(trx, userId);
    const keys: Array<{ id: string }> = await trx('api_keys')
      .where({ user_id: userId, is_active: true })
      .update({ is_active: false, locked: true, updated_at: trx.fn.now() })
      .returning('id');
    const oauth = await revokeOAuthGrants(trx, { user_id: userId }, { consents: true });
    await recordAuditEvent(
      attributed(actor, {
        user_id: userId,
        event_type: 'user_deleted',
        resource_type: 'user',
        resource_id: userId,
        description: 'account deleted (soft)',
        metadata: {
          stage: 'soft_deleted',
          reason: actor.reason ?? null,
          revoked_sessions: sessionIds.length,
          revoked_api_keys: keys.length,
          revoked_oauth_tokens: oauth.accessTokens,
          revoked_oauth_consents: oauth.consents,
        },
      }),
      trx,
    );
    afterCommit(trx, async () => {
      await invalidateCredentials(ctx, { apiKeyIds: keys.map((k) => k.id) });
      await ctx.bus.publishToUser(userId, {
        type: 'accountDeleted',
        userId,
        reason: actor.reason ?? 'account deleted',
        timestamp: now(),
      });
      await announceSessionsRevoked(ctx, userId, sessionIds, 'account_deleted');
      await announceForcedLogout(ctx, userId, 'account_deleted');
    });
  });
}

/** Clears a scheduled deletion and a soft delete; 409 when neither is set. */
export async function cancelDeletion(
  ctx: ServiceContext,
  userId: string,
  actor: Attribution,
): Promise<{ wasDeleted: boolean }> {
  const wasDeleted = await transaction(ctx.db, async (trx) => {
    // A soft-deleted user's addresses were free: another user may have signed up or in with one
    // meanwhile. Restoring it then would give one address to two live users (a split account).
    // The addresses are locked first, in order, as every writer of addresses locks them (a sign-in
    // takes the address, then the user row: the other way round, the two deadlocked).
    const emails: string[] = (
      await trx('platform_accounts')
        .where('user_id', userId)
        .whereNotNull('email')
        .distinct(trx.raw('lower(email) AS email'))
    )
      .map((r: { email: string }) => r.email)
      .sort();
    for (const email of emails) await lockEmailAddress(trx, email);
    const user = await User.query(trx).findById(userId).forUpdate();
    if (!user) throw notFound('user');
    if (!user.scheduled_deletion_at && !user.deleted_at) throw conflict('no deletion is scheduled for this user');
    if (user.deleted_at) {
      for (const email of emails)
        if (await emailInUse(trx, email, userId))
          throw conflict(`${email} is now used by another account: the account cannot be restored with it`);
    }
    await User.query(trx).patch({ scheduled_deletion_at: null, deleted_at: null }).where('id', userId);
    await recordAuditEvent(
      attributed(actor, {
        user_id: userId,
        event_type: 'user_updated',
        resource_type: 'user',
        resource_id: userId,
        description: 'account deletion cancelled',
        metadata: { action: 'deletion_cancelled', was_deleted: !!user.deleted_at },
      }),
      trx,
    );
    afterCommit(trx, () => invalidateCredentials(ctx, { userIds: [userId] }));
    return !!user.deleted_at;
  });
  return { wasDeleted };
}

/**
 * Audit events a purge anonymises per statement. Each costs its UPDATE about 30 µs (nine indexes),
 * so a batch stays far below `statement_timeout` (DATABASE_REQUEST_TIMEOUT_MS, which bounds
 * POST /v1/admin/users/{id}/force-delete) however long the user's history: in one statement, a few
 * hundred thousand events made the account impossible to purge from the API.
 */
export const AUDIT_ANONYMISE_BATCH = 10_000;

/**
 * Irreversible deletion: the user row goes (platform accounts, sessions, roles, API keys, bans and
 * tokens, the used registration token included, cascade), mails to the user leave the outbox (by
 * the user's id, by their addresses, and by the addresses they gave up for mails and tokens that
 * name no user), and the user's audit events keep only what is not personal (who/where fields and
 * metadata are cleared). One `user_deleted` event remains, naming only the former id.
 */
export async function purgeUser(
  ctx: ServiceContext,
  userId: string,
  actor: Attribution & { reason: string },
): Promise<boolean> {
  if (actor.actorId === userId) throw badRequest('use DELETE /v1/users/me to delete your own account');
  return transaction(ctx.db, async (trx) => {
    const user = await trx('users').where('id', userId).forUpdate().first('id', 'scheduled_deletion_at', 'deleted_at');
    if (!user) return false;
    // Spec §3 (user deletion): only an account on its way out (scheduled, or soft-deleted and in
    // its grace period) is purged; an active one is deleted first (DELETE /v1/users/{id}).
    if (!user.scheduled_deletion_at && !user.deleted_at)
      throw conflict('no deletion is scheduled for this user: delete the account first (DELETE /v1/users/{id})');
    const emails: string[] = (
      await trx('platform_accounts').where('user_id', userId).whereNotNull('email').pluck('email')
    ).map((e: string) => e.toLowerCase());
    // The addresses the user gave up by an email change, and when: the audit trail keeps them until
    // now (its metadata is cleared below). Read before that, to find what was written to them.
    const previous = (
      (await trx('audit_events')
        .where('user_id', userId)
        .whereRaw("metadata->>'action' = 'email_changed'")
        .whereRaw("metadata->>'previous_email' IS NOT NULL")
        .groupByRaw("lower(metadata->>'previous_email')")
        .select(
          trx.raw("lower(metadata->>'previous_email') AS email"),
          // As text: a JS Date would drop the microseconds.
          trx.raw('max(created_at)::text AS until'),
        )) as Array<{ email: string; until: string }>
    ).filter((p) => !emails.includes(p.email));
    // In batches (AUDIT_ANONYMISE_BATCH): each side of the OR has its index
    // (audit_events_user_created, audit_events_actor_id_index), so the events are found by a bitmap
    // OR, not a scan of the log; an event anonymised no longer names the user, so the next batch
    // finds the next ones.
    for (;;) {
      const ids = trx('audit_events')
        .where('user_id', userId)
        .orWhere('actor_id', userId)
        .limit(AUDIT_ANONYMISE_BATCH)
        .select('id');
      const n = await trx('audit_events')
        .whereIn('id', ids)
        .update({
          // An event the user did to someone else stays in that person's history, without its actor.
          user_id: trx.raw('CASE WHEN user_id = ? THEN NULL ELSE user_id END', [userId]),
          actor_id: trx.raw('CASE WHEN actor_id = ? THEN NULL ELSE actor_id END', [userId]),
          ip_address: null,
          user_agent: null,
          description: null,
          error_message: null,
          metadata: trx.raw("'{}'::jsonb"),
          country_code: null,
          country_name: null,
          city: null,
          region: null,
        });
      if (n < AUDIT_ANONYMISE_BATCH) break;
    }
    // The user's mail and one-time tokens: by the user's id (tokens cascade with the user row;
    // registrations are tied to the user they created), by the current addresses, and by each
    // given-up address for rows that name no user and were written while the address was the
    // user's (a registration tied to nobody, as before registrations were tied). A later holder of
    // that address keeps theirs.
    const lowerTo = trx.raw('lower(to_address)') as unknown as string;
    const outbox = trx('email_outbox').where('user_id', userId);
    if (emails.length) outbox.orWhereIn(lowerTo, emails);
    for (const p of previous)
      outbox.orWhere((q) => q.whereNull('user_id').where(lowerTo, p.email).where('created_at', '<=', p.until));
    await outbox.delete();
    if (emails.length || previous.length) {
      const tokens = trx('account_tokens').whereIn('email', emails);
      for (const p of previous)
        tokens.orWhere((q) => q.whereNull('user_id').where('email', p.email).where('created_at', '<=', p.until));
      await tokens.delete();
    }
    await trx('users').where('id', userId).delete();
    await recordAuditEvent(
      attributed(actor, {
        user_id: null,
        event_type: 'user_deleted',
        resource_type: 'user',
        resource_id: userId,
        description: 'account and personal data permanently deleted',
        metadata: { stage: 'purged', reason: actor.reason },
      }),
      trx,
    );
    afterCommit(trx, async () => {
      await ctx.bus.publishToUser(userId, { type: 'accountDeleted', userId, reason: actor.reason, timestamp: now() });
      await announceForcedLogout(ctx, userId, 'account_deleted');
    });
    return true;
  });
}

/**
 * Scheduled task: purges every account whose grace period has ended (scheduled_deletion_at in the
 * past), and only those. One failing account does not stop the others.
 */
export async function purgeDeletedAccounts(ctx: ServiceContext): Promise<{ purged: number; failed: number }> {
  const due: string[] = await ctx
    .db('users')
    .whereNotNull('scheduled_deletion_at')
    .where('scheduled_deletion_at', '<=', ctx.db.fn.now())
    .orderBy('scheduled_deletion_at')
    .limit(500)
    .pluck('id');
  let purged = 0;
  let failed = 0;
  for (const id of due) {
    try {
      if (await purgeUser(ctx, id, { actorId: null, reason: 'deletion grace period ended' })) purged++;
    } catch (err) {
      failed++;
      ctx.logger.error({ userId: id, err: (err as Error).message }, 'could not purge account');
    }
  }
  if (due.length) ctx.logger.info({ purged, failed }, 'scheduled account deletions carried out');
  return { purged, failed };
}
