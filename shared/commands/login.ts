import type { Knex } from 'knex';
import { attributed, Attribution, recordAuditEvents } from '../audit';
import {
  clearLoginFailures,
  releaseAttempt,
  reserveLoginAttempt,
  throttleSubjectForEmail,
  Who,
} from '../caches/loginThrottle';
import { credentialStamp, twoFactorLoginGate } from '../auth/twoFactorChallenge';
import { withMailSlot } from '../caches/mailSlots';
import type { ServiceContext } from '../context';
import { sha256 } from '../crypto';
import { transaction } from '../db';
import { verifyPassword } from '../domain/passwords';
import { forbidden, HttpError, tooManyRequests, unauthorized } from '../errors';
import { User } from '../models/User';
import { findActiveBan } from '../queries/access';
import { sessionLifetimeMs } from '../queries/accountSettings';
import { emailPlatform, findEmailAccountByAddress, flatUser } from '../queries/users';
import { EmailRequest, sendEmailVerification } from './emailFlows';
import { createSession } from './sessions';

/** One message for unknown address and wrong password alike (no account enumeration). */
const BAD_CREDENTIALS = 'invalid email or password';
/** The account was deleted while its sign-in was under way. */
const ACCOUNT_GONE = 'the account was deleted; no session was created';

/** Who is signing in (the actor) and from where, with the platform of the credential that was checked. */
export interface LoginAttempt extends Attribution {
  userId: string;
  /** Platform of the credential that was checked (`email` for password sign-in). */
  platformSlug: string;
  /** Digest of the password that was checked (`credentialStamp`): a 2FA challenge carries it. */
  credentialStamp?: string;
}

/** What a gate answers instead of a session: the 2FA challenge of decisions.md. */
export interface LoginChallenge {
  requires_two_factor: true;
  challenge_token: string;
  expires_at: string;
}

/**
 * A check that runs after the password was accepted and before a session exists. It returns a
 * challenge to stop the sign-in there (no session is created), or null to let it through. The
 * two-factor feature adds its gate here (one line) and, once the code is checked at
 * POST /v1/auth/2fa/check, finishes the sign-in with `completeLogin`.
 */
export type LoginGate = (ctx: ServiceContext, attempt: LoginAttempt) => Promise<LoginChallenge | null>;

/** Registry of sign-in gates, run in order; the first challenge wins. */
const loginGates: LoginGate[] = [twoFactorLoginGate];

/** Runs the gates; returns the first challenge, or null when sign-in may complete. */
async function runLoginGates(ctx: ServiceContext, attempt: LoginAttempt): Promise<LoginChallenge | null> {
  for (const gate of loginGates) {
    const challenge = await gate(ctx, attempt);
    if (challenge) return challenge;
  }
  return null;
}

/** The 403 of a sign-in refused by a ban. */
const bannedAnswer = (ban: { expires_at: Date | null }) =>
  forbidden(ban.expires_at ? `account is banned until ${new Date(ban.expires_at).toISOString()}` : 'account is banned');

/** Whether the password an attempt checked is still its account's (the attempt's credentialStamp). */
async function credentialStillCurrent(trx: Knex.Transaction, attempt: LoginAttempt): Promise<boolean> {
  const row = await trx('platform_accounts as pa')
    .join('platforms as p', 'p.id', 'pa.platform_id')
    .where({ 'pa.user_id': attempt.userId, 'p.slug': attempt.platformSlug })
    .first('pa.password_hash');
  return !!row?.password_hash && credentialStamp(row.password_hash) === attempt.credentialStamp;
}

/**
 * Finishes a sign-in: creates the session (lifetime from system config), stamps last_login_at,
 * writes the `login` audit event and answers `{data: flattened user, session}`.
 *
 * The user's row is locked first, as a ban, a deletion and a password reset lock it: one of those
 * that committed while this sign-in was under way is seen here (no session for a banned or
 * deleted account, nor for a password the account no longer has: 403, 401), and one that waits
 * for this lock ends the new session with the others. Checked before the lock, a ban or a reset
 * landing in between left a working session behind it.
 */
export async function completeLogin(ctx: ServiceContext, attempt: LoginAttempt) {
  const expires = new Date(Date.now() + (await sessionLifetimeMs(ctx.db)));
  const { session, token } = await transaction(ctx.db, async (trx) => {
    const live = await User.query(trx)
      .patch({ last_login_at: new Date() })
      .where('id', attempt.userId)
      .whereNull('deleted_at');
    if (live === 0) throw unauthorized(ACCOUNT_GONE);
    const ban = await findActiveBan(trx, attempt.userId);
    if (ban) throw bannedAnswer(ban);
    if (attempt.credentialStamp !== undefined && !(await credentialStillCurrent(trx, attempt)))
      throw unauthorized(BAD_CREDENTIALS);
    const created = await createSession(trx, attempt.userId, expires, attempt);
    // Both events in one statement: the sign-in and the session it opened.
    const event = {
      user_id: attempt.userId,
      resource_type: 'session',
      resource_id: created.session.id,
      metadata: { platform: attempt.platformSlug, session_id: created.session.id },
    };
    await recordAuditEvents(
      [
        attributed(attempt, { ...event, event_type: 'login' }),
        attributed(attempt, {
          ...event,
          event_type: 'session_created',
          metadata: { ...event.metadata, kind: 'login', expires_at: expires.toISOString() },
        }),
      ],
      trx,
    );
    return created;
  });
  return {
    data: await flatUser(ctx.db, attempt.userId),
    session: { sessionToken: token, expires: session.expires_at.toISOString() },
  };
}

function tooManyAttempts(seconds: number, limit: number): HttpError {
  return tooManyRequests(`too many failed sign-in attempts; try again in ${seconds} seconds`, limit, seconds);
}

/**
 * Email/password sign-in. Every attempt is counted (per account and per client address) before the
 * password is checked; past the threshold the answer is 429 without a check. A wrong password and
 * an unknown address are the same 401; an unverified address (a new verification mail goes out)
 * and a banned account are refused. Answers the session, or the challenge of a sign-in gate.
 */
export async function passwordLogin(
  ctx: ServiceContext,
  input: { email: string; password: string },
  clientIp: string | null,
  meta: EmailRequest,
) {
  const who: Who = { subject: throttleSubjectForEmail(input.email), ip: clientIp };
  // Not part of any transaction: buffered, so a failed attempt costs no database round trip.
  const failure = (userId: string | null, reason: string) =>
    ctx.audit.record(
      attributed(
        { ...meta, actorId: userId },
        {
          user_id: userId,
          event_type: 'login_failed',
          status: 'failure',
          error_message: reason,
          // The address itself is not stored for unknown accounts: only a hash to correlate attempts.
          metadata: { platform: 'email', reason, email_sha256: sha256(input.email) },
        },
      ),
    );

  if (!(await emailPlatform(ctx.db)).enabled)
    throw forbidden('sign-in with email is disabled; use another linked sign-in method');

  // The attempt is counted before the password is checked (atomically with the cool-down check),
  // so a burst of concurrent guesses gets at most the threshold of checks; the rest answer 429.
  const reservation = await reserveLoginAttempt(ctx.db, who);
  if (reservation.retryAfterSeconds > 0) {
    const known = await findEmailAccountByAddress(ctx.db, input.email);
    failure(known?.user_id ?? null, 'too_many_attempts');
    throw tooManyAttempts(reservation.retryAfterSeconds, reservation.limit);
  }
  // A lookup that fails (the database unreachable: 503) checked no password: its count is given back.
  const account = await findEmailAccountByAddress(ctx.db, input.email).catch(async (err: unknown) => {
    await releaseAttempt(ctx.db, reservation);
    throw err;
  });
  // Checked for unknown addresses too (against a dummy hash), so the timing tells nothing.
  const passwordOk = await verifyPassword(account?.password_hash, input.password);
  if (!account || !passwordOk) {
    // The reservation stays: it is this failure's count.
    failure(account?.user_id ?? null, account ? 'wrong_password' : 'unknown_account');
    throw unauthorized(BAD_CREDENTIALS);
  }
  // The right password is not a failed guess, whatever is refused below (unverified, banned).
  await releaseAttempt(ctx.db, reservation);
  const userId = account.user_id;
  if (!account.email_verified_at) {
    // A verification mail that could not be written gives its minute back (withMailSlot).
    await withMailSlot(ctx.redis, ctx.config, 'verify', input.email, () => sendEmailVerification(ctx, userId, meta));
    throw forbidden('email address not verified: we sent a new verification email');
  }
  const ban = await findActiveBan(ctx.db, userId);
  if (ban) throw bannedAnswer(ban);
  await clearLoginFailures(ctx.db, who.subject);

  const attempt: LoginAttempt = {
    actorId: userId,
    ipAddress: meta.ipAddress ?? null,
    userAgent: meta.userAgent ?? null,
    userId,
    platformSlug: 'email',
    credentialStamp: credentialStamp(account.password_hash ?? ''),
  };
  // Second factor and any other gate: a challenge instead of a session.
  return (await runLoginGates(ctx, attempt)) ?? (await completeLogin(ctx, attempt));
}
