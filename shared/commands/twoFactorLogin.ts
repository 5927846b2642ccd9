import { attributed, recordAuditEvent } from '../audit';
import { credentialStamp, openChallenge, CHALLENGE_TTL_MS } from '../auth/twoFactorChallenge';
import { challengeSpent, claimChallenge } from '../caches/twoFactorThrottle';
import type { ServiceContext } from '../context';
import { badRequest, forbidden } from '../errors';
import { findActiveBan } from '../queries/access';
import { completeLogin, LoginAttempt } from './login';
import { TwoFactorActor, withTwoFactorCode } from './twoFactor';

const INVALID_CHALLENGE = 'challenge_token: invalid or expired; sign in again';

/**
 * What the sign-in checked before it issued the challenge must still hold when the code comes: the
 * platform enabled (403, as the sign-in answers), the account not deleted, and the password not
 * changed or reset since (the challenge is void: sign in again). Checked before the code is, so a
 * void challenge spends no backup code.
 */
async function assertChallengeCurrent(
  ctx: ServiceContext,
  challenge: { userId: string; platformSlug: string; credentialStamp?: string },
): Promise<void> {
  const { rows } = await ctx.db.raw<{
    rows: Array<{ deleted_at: Date | null; enabled: boolean | null; password_hash: string | null }>;
  }>(
    `SELECT u.deleted_at, p.enabled, pa.password_hash
       FROM users u
       LEFT JOIN platforms p ON p.slug = ?
       LEFT JOIN platform_accounts pa ON pa.user_id = u.id AND pa.platform_id = p.id
      WHERE u.id = ?
      LIMIT 1`,
    [challenge.platformSlug, challenge.userId],
  );
  const row = rows[0];
  if (!row || row.deleted_at) throw badRequest(INVALID_CHALLENGE);
  if (!row.enabled)
    throw forbidden(`sign-in with ${challenge.platformSlug} is disabled; use another linked sign-in method`);
  if (
    challenge.credentialStamp !== undefined &&
    (!row.password_hash || credentialStamp(row.password_hash) !== challenge.credentialStamp)
  )
    throw badRequest(INVALID_CHALLENGE);
}

/**
 * POST /v1/auth/2fa/check: finishes a sign-in that a 2FA challenge stopped, with a TOTP or backup
 * code. Wrong codes count towards the user's lock-out (429) and write `login_failed`; the right one
 * writes `2fa_verified`, spends the challenge and answers as a successful sign-in.
 */
export async function checkTwoFactorLogin(
  ctx: ServiceContext,
  input: { challenge_token: string; code: string },
  meta: TwoFactorActor,
) {
  const challenge = openChallenge(ctx.config, input.challenge_token);
  if (!challenge) throw badRequest(INVALID_CHALLENGE);
  const { userId } = challenge;
  await assertChallengeCurrent(ctx, challenge);
  const by = { ...meta, actorId: userId };
  // A spent challenge is refused before its code is checked: it must not spend a backup code or a
  // time step, nor count a check. (It is claimed once the code matched, so parallel guesses each count.)
  const tokenHash = challenge.id;
  if (await challengeSpent(ctx.redis, ctx.config, tokenHash)) throw badRequest(INVALID_CHALLENGE);
  await withTwoFactorCode(
    ctx,
    userId,
    input.code,
    by,
    'login',
    {
      allowBackup: true,
      state: (s) => {
        // 2FA switched off meanwhile: the challenge is void, the user signs in again (without one).
        if (!s.row?.enabled_at) throw badRequest(INVALID_CHALLENGE);
      },
    },
    async (trx, s, m) => {
      // Claimed under the 2FA row lock, before the code's spending commits: of parallel checks with
      // different right codes one wins, and the others roll back, leaving their backup codes unused.
      if (!(await claimChallenge(ctx.redis, ctx.config, tokenHash, CHALLENGE_TTL_MS / 1000 + 60)))
        throw badRequest(INVALID_CHALLENGE);
      await recordAuditEvent(
        attributed(by, {
          user_id: userId,
          event_type: '2fa_verified',
          resource_type: 'user',
          resource_id: userId,
          metadata: { platform: challenge.platformSlug, method: m.kind, setup_platform: s.platformSlug },
        }),
        trx,
      );
    },
  );
  const ban = await findActiveBan(ctx.db, userId);
  if (ban) throw forbidden('account is banned');
  const attempt: LoginAttempt = {
    actorId: userId,
    ipAddress: meta.ipAddress ?? null,
    userAgent: meta.userAgent ?? null,
    userId,
    platformSlug: challenge.platformSlug,
    // Checked again under the user's row lock (completeLogin): a reset between here and the session voids it.
    credentialStamp: challenge.credentialStamp,
  };
  return completeLogin(ctx, attempt);
}
