import { attributed, recordAuditEvent } from '../audit';
import { clearLoginFailures, throttleSubjectForEmail } from '../caches/loginThrottle';
import { withMailSlot } from '../caches/mailSlots';
import type { ServiceContext } from '../context';
import { afterCommit, transaction } from '../db';
import { hashPassword } from '../domain/passwords';
import { badRequest } from '../errors';
import { PlatformAccount } from '../models/PlatformAccount';
import { writeOutbox } from '../outbox';
import { claimAccountToken } from './accountTokens';
import { peekAccountToken } from '../queries/accountTokens';
import { EmailRequest, INVALID_TOKEN } from './emailFlows';
import { revokeOAuthGrants } from './oauthProvider';
import { announceSessionsRevoked, deleteUserSessions } from './sessions';

/**
 * Asks for a password reset mail. Only work that is the same for every address happens here (the
 * mail slot and one outbox row): the account lookup, token, audit event and mail run in the
 * passwordResets job, so the answer's timing says nothing about the address. The job is enqueued
 * by the side-effect relay, so a request never waits on Redis (BullMQ waits for a lost connection
 * without a limit) and a reset asked for during an outage is mailed once Redis is back.
 */
export async function requestPasswordReset(ctx: ServiceContext, email: string, meta: EmailRequest): Promise<void> {
  const written = await withMailSlot(ctx.redis, ctx.config, 'reset', email, async (claim) => {
    await writeOutbox(ctx.db, 'passwordReset', {
      email,
      ipAddress: meta.ipAddress ?? null,
      userAgent: meta.userAgent ?? null,
      acceptLanguage: meta.acceptLanguage ?? null,
      // Redis could not say whether a mail went out within the minute: the job claims the slot.
      ...(claim === 'unknown' ? { claimSlot: true } : {}),
    });
    return true;
  });
  if (written) ctx.outbox.wake();
}

/**
 * Sets a new password with an emailed reset token: the address counts as verified (the link
 * proves the mailbox), the user is logged out everywhere (every session ends, every OAuth access
 * and refresh token and pending code is revoked; the consents stay, so the user may authorize an
 * app again without being asked anew), and after the commit the sign-in counter is cleared,
 * credentials are dropped everywhere and clients get sessionRevoked and forceLogout.
 */
export async function resetPassword(
  ctx: ServiceContext,
  token: string,
  password: string,
  meta: EmailRequest,
): Promise<void> {
  const passwordHash = await hashPassword(password);
  await transaction(ctx.db, async (trx) => {
    // The user's row lock before the token's, in the order of every writer of a user's sign-ins
    // (lockTokenUser, emailFlows.ts): a sign-in with the old password waiting for it finds the
    // password changed (completeLogin), and the account read below is the committed one (an
    // address change that committed meanwhile is seen).
    const found = await peekAccountToken(trx, token, ['password_reset']);
    if (!found?.user_id) throw badRequest(INVALID_TOKEN);
    if (!(await trx('users').where('id', found.user_id).whereNull('deleted_at').forUpdate().first('id')))
      throw badRequest(INVALID_TOKEN);
    const row = await claimAccountToken(trx, token, ['password_reset']);
    if (!row?.user_id || row.user_id !== found.user_id) throw badRequest(INVALID_TOKEN);
    const userId = row.user_id;
    const account = await PlatformAccount.query(trx)
      .findById(String(row.payload.platform_account_id))
      .where('user_id', userId)
      .forUpdate();
    // The token proves the mailbox it was sent to: once the account's address (or its owner) has
    // changed, whoever holds the old mailbox can no longer set the password.
    if (!account || account.email?.toLowerCase() !== row.email?.toLowerCase()) throw badRequest(INVALID_TOKEN);
    await PlatformAccount.query(trx)
      .patch({ password_hash: passwordHash, email_verified_at: account.email_verified_at ?? new Date() })
      .where('id', account.id);
    const sessionIds = await deleteUserSessions(trx, userId);
    const oauth = await revokeOAuthGrants(trx, { user_id: userId }, { consents: false });
    await recordAuditEvent(
      attributed(
        { ...meta, actorId: userId },
        {
          user_id: userId,
          event_type: 'password_changed',
          resource_type: 'platform_account',
          resource_id: account.id,
          metadata: { via: 'reset', revoked_sessions: sessionIds.length, revoked_oauth_tokens: oauth.accessTokens },
        },
      ),
      trx,
    );
    afterCommit(trx, async () => {
      await clearLoginFailures(ctx.db, throttleSubjectForEmail(account.email ?? ''));
      await announceSessionsRevoked(ctx, userId, sessionIds, 'password_reset');
      await ctx.bus.publishToUser(userId, {
        type: 'forceLogout',
        userId,
        reason: 'password_reset',
        timestamp: new Date().toISOString(),
      });
    });
  });
}
