import Router from '@koa/router';
import { findActiveBan } from '../../shared/queries/access';
import { claimAccountToken, issueAccountToken } from '../../shared/commands/accountTokens';
import { announceEmailVerified, applyEmailChange, applyEmailLink, applyEmailVerification, INVALID_TOKEN, sendEmailVerification } from '../../shared/commands/emailFlows';
import { completeLogin, runLoginGates } from '../../shared/commands/login';
import { clearLoginFailures, releaseAttempt, reserveLoginAttempt, throttleSubjectForEmail, Who } from '../../shared/caches/loginThrottle';
import { hashPassword, PASSWORD_MAX, PASSWORD_MIN, verifyPassword } from '../../shared/domain/passwords';
import { recordAuditEvent } from '../../shared/audit';
import { announceSessionsRevoked, deleteUserSessions } from '../../shared/commands/sessions';
import { createVerifiedEmailUser } from '../../shared/commands/users';
import { zEmail, zUsername } from '../../shared/domain/accounts';
import { emailPlatform, findEmailAccountByAddress, findUserIdByEmail, flatUser, userAccounts } from '../../shared/queries/users';
import { sha256 } from '../../shared/crypto';
import { emailLocale } from '../../shared/emails/accountEmails';
import { writeAccountEmail } from '../../shared/emails/outbox';
import { badRequest, forbidden, HttpError, unauthorized } from '../../shared/errors';
import { PlatformAccount } from '../../shared/models/PlatformAccount';
import { User } from '../../shared/models/User';
import { redisKey } from '../../shared/redis';
import { z } from '../../shared/zod';
import { defineRoute, AppContext, AppState } from '../routing';
import type { ApiServices } from '../services';
import { created } from '../responses';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['auth'];
const zPassword = () => z.string().min(PASSWORD_MIN, { message: `must be at least ${PASSWORD_MIN} characters` }).max(PASSWORD_MAX);
const zToken = () => z.string().min(16, { message: 'is not a valid token' }).max(200);

/** One message for unknown address and wrong password alike (no account enumeration). */
export const BAD_CREDENTIALS = 'invalid email or password';
const REGISTER_ACCEPTED = 'check your inbox: if the address can be used, we sent an email with the next step';
const RESET_ACCEPTED = 'if an account with this address exists, we sent an email with a link to reset the password';
/** At most one mail of a kind per address per minute, so these anonymous endpoints cannot flood a mailbox. */
const MAIL_INTERVAL_SECONDS = 60;

/** Claims the per-address mail slot of a kind; true when a mail may go out (fail-open without Redis). */
async function mailSlot(ctx: AppContext, kind: string, email: string): Promise<boolean> {
  const s = ctx.services;
  const r = await s.redis.set(redisKey(s.config, 'mailslot', kind, sha256(email)), '1', 'EX', MAIL_INTERVAL_SECONDS, 'NX').catch(() => 'OK');
  return r === 'OK';
}

/**
 * The client's address for throttling. The system key is the first-party web app relaying a user's
 * request: its own IP says nothing about the user, so the forwarded address is used, and without
 * one only the per-account counter applies.
 */
function clientIp(ctx: AppContext): string | null {
  if (ctx.state.principal.kind === 'system') {
    const fwd = ctx.get('x-forwarded-for').split(',')[0]?.trim();
    return fwd || null;
  }
  return ctx.ip;
}

const meta = (ctx: AppContext) => ({ ipAddress: clientIp(ctx) ?? ctx.ip, userAgent: ctx.get('user-agent') || null, acceptLanguage: ctx.get('accept-language') || null });

function tooManyAttempts(ctx: AppContext, seconds: number): HttpError {
  ctx.set('Retry-After', String(seconds));
  return new HttpError(429, 'TooManyRequests', `too many failed sign-in attempts; try again in ${seconds} seconds`);
}

/** The /v1/auth/* routes of decisions.md: email/password registration, sign-in and recovery. */
export function authFlowRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/register',
      summary: 'Start an email/password registration',
      description:
        'Always 202 with the same message: a verification mail goes to a free address, a "you already have an account" mail to the owner of a taken one. ' +
        'The account is created by /v1/auth/register/verify. A taken username is not refused here either (that would tell anyone which names exist): ' +
        'it is checked when the account is created, and a name taken by then is replaced by a free one close to it (alice → alice_3f9a1c).',
      tags: TAG,
      auth: 'public',
      body: z.object({ email: zEmail(), password: zPassword(), username: zUsername().optional(), locale: z.string().max(10).optional() }),
      responses: { 202: { description: '{message}' }, 403: { description: 'Email sign-in is disabled' } },
    },
    async (ctx, { body }) => {
      const s = ctx.services;
      const platform = await emailPlatform(s.db);
      if (!platform.enabled) throw forbidden('registration with email is disabled');
      // Hash in both branches so the response time does not tell taken and free addresses apart.
      const passwordHash = await hashPassword(body.password);
      const m = meta(ctx);
      const ownerId = (await findEmailAccountByAddress(s.db, body.email))?.user_id ?? (await findUserIdByEmail(s.db, body.email, { verifiedOnly: true }));
      if (!(await mailSlot(ctx, 'register', body.email))) {
        // A mail went to this address within the minute: same answer, no second mail.
        ctx.status = 202;
        ctx.body = { message: REGISTER_ACCEPTED };
        return;
      }
      await s.db.transaction(async (trx) => {
        if (ownerId) {
          const owner = await User.query(trx).findById(ownerId);
          const providers = [...new Set((await userAccounts(trx, ownerId)).map((a) => a.platform?.name ?? ''))].filter(Boolean);
          return writeAccountEmail(trx, s.config, {
            to: body.email,
            userId: ownerId,
            template: 'account_exists',
            locale: emailLocale(owner?.preferred_locale, body.locale ?? m.acceptLanguage),
            vars: { email: body.email, providers },
          });
        }
        const { token, row } = await issueAccountToken(trx, {
          purpose: 'registration',
          userId: null,
          email: body.email,
          payload: { password_hash: passwordHash, username: body.username ?? null, locale: body.locale ?? null },
        });
        return writeAccountEmail(trx, s.config, {
          to: body.email,
          userId: null,
          template: 'registration',
          locale: emailLocale(body.locale, m.acceptLanguage),
          token,
          vars: { expiresAt: row.expires_at, email: body.email },
        });
      });
      s.outbox.wake();
      ctx.status = 202;
      ctx.body = { message: REGISTER_ACCEPTED };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/register/verify',
      summary: 'Finish a registration with the emailed token',
      description:
        'Creates the user (User role) with an email platform account whose address counts as verified. The username asked for at registration is used when ' +
        'it is still free; when it is taken by now the user gets a free one close to it (alice → alice_3f9a1c), and without one a name made from the ' +
        'address. data.username says which; the user can change it later (PATCH /v1/users/{id}).',
      tags: TAG,
      auth: 'public',
      body: z.object({ token: zToken() }),
      responses: { 201: { description: '{data: flattened user}' }, 400: { description: 'Invalid or expired token' }, 409: { description: 'Address taken meanwhile' } },
    },
    async (ctx, { body }) => {
      const s = ctx.services;
      const m = meta(ctx);
      const userId = await s.db.transaction(async (trx) => {
        const token = await claimAccountToken(trx, body.token, ['registration']);
        if (!token?.email) throw badRequest(INVALID_TOKEN);
        if (!(await emailPlatform(trx)).enabled) throw forbidden('registration with email is disabled');
        // A taken name is not an error: registration did not check it (no enumeration); createVerifiedEmailUser picks a free one close to it.
        const username = typeof token.payload.username === 'string' ? token.payload.username : null;
        const locale = typeof token.payload.locale === 'string' && token.payload.locale ? token.payload.locale.toLowerCase().slice(0, 10) : null;
        const { user, account } = await createVerifiedEmailUser(trx, { email: token.email, passwordHash: String(token.payload.password_hash), username, locale });
        await recordAuditEvent({ user_id: user.id, actor_id: user.id, ip_address: m.ipAddress, user_agent: m.userAgent, event_type: 'user_created', resource_type: 'user', resource_id: user.id, metadata: { platform: 'email', platform_account_id: account.id } }, trx);
        return user.id;
      });
      created(ctx, { data: await flatUser(s.db, userId), _links: { self: `/v1/users/${userId}` } });
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/login',
      summary: 'Sign in with email and password',
      description:
        'Answers {data: flattened user, session: {sessionToken, expires}}, or, when a second factor is required, {requires_two_factor, challenge_token, expires_at} ' +
        'and no session. Wrong credentials are one 401 for unknown address and wrong password alike. Every attempt is counted per account and per IP before ' +
        'the password is checked (the right password gives its count back); past the threshold the answer is 429 with Retry-After, without a check.',
      tags: TAG,
      auth: 'public',
      body: z.object({ email: zEmail(), password: z.string().min(1, { message: 'is required' }).max(PASSWORD_MAX) }),
      responses: {
        200: { description: 'Signed in, or a 2FA challenge' },
        401: { description: 'Wrong email or password' },
        403: { description: 'Email sign-in disabled, address not verified, or account banned' },
        429: { description: 'Too many failed attempts (Retry-After)' },
      },
    },
    async (ctx, { body }) => {
      const s = ctx.services;
      const m = meta(ctx);
      const who: Who = { subject: throttleSubjectForEmail(body.email), ip: clientIp(ctx) };
      const failure = (userId: string | null, reason: string) =>
        recordAuditEvent({
          user_id: userId,
          actor_id: userId,
          ip_address: m.ipAddress,
          user_agent: m.userAgent,
          event_type: 'login_failed',
          status: 'failure',
          error_message: reason,
          // The address itself is not stored for unknown accounts: only a hash to correlate attempts.
          metadata: { platform: 'email', reason, email_sha256: sha256(body.email) },
        });

      const platform = await emailPlatform(s.db);
      if (!platform.enabled) throw forbidden('sign-in with email is disabled; use another linked sign-in method');

      // The attempt is counted before the password is checked (atomically with the cool-down check),
      // so a burst of concurrent guesses gets at most the threshold of checks; the rest answer 429.
      const reservation = await reserveLoginAttempt(s.redis, s.config, who);
      if (reservation.retryAfterSeconds > 0) {
        const known = await findEmailAccountByAddress(s.db, body.email);
        await failure(known?.user_id ?? null, 'too_many_attempts');
        throw tooManyAttempts(ctx, reservation.retryAfterSeconds);
      }
      const account = await findEmailAccountByAddress(s.db, body.email);
      if (!(await verifyPassword(account?.password_hash, body.password))) {
        // The reservation stays: it is this failure's count.
        await failure(account?.user_id ?? null, account ? 'wrong_password' : 'unknown_account');
        throw unauthorized(BAD_CREDENTIALS);
      }
      // The right password is not a failed guess, whatever is refused below (unverified, banned).
      await releaseAttempt(s.redis, reservation);
      const userId = account!.user_id;
      if (!account!.email_verified_at) {
        if (await mailSlot(ctx, 'verify', body.email)) await sendEmailVerification(s, userId, m);
        throw forbidden('email address not verified: we sent a new verification email');
      }
      const ban = await findActiveBan(s.db, userId);
      if (ban) throw forbidden(ban.expires_at ? `account is banned until ${new Date(ban.expires_at).toISOString()}` : 'account is banned');
      await clearLoginFailures(s.redis, s.config, who.subject);

      const attempt = { userId, platformSlug: 'email', ipAddress: m.ipAddress, userAgent: m.userAgent };
      // Second factor and any other gate: a challenge instead of a session.
      const challenge = await runLoginGates(s, attempt);
      ctx.body = challenge ?? (await completeLogin(s, attempt));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/verify-email',
      summary: 'Confirm an emailed verification token',
      description: 'Accepts the tokens of address verification, email change and email link mails, so a link works without being signed in.',
      tags: TAG,
      auth: 'public',
      body: z.object({ token: zToken() }),
      responses: { 200: { description: '{success, message}' }, 400: { description: 'Invalid or expired token' }, 409: { description: 'Address taken meanwhile' } },
    },
    async (ctx, { body }) => {
      const s = ctx.services;
      const m = meta(ctx);
      const result = await s.db.transaction(async (trx) => {
        const token = await claimAccountToken(trx, body.token, ['email_verification', 'email_change', 'email_link']);
        if (!token) throw badRequest(INVALID_TOKEN);
        if (token.purpose === 'email_change') return { ...(await applyEmailChange(trx, token, m)), message: 'your email address was changed' };
        if (token.purpose === 'email_link') return { ...(await applyEmailLink(trx, token, m)), message: 'email sign-in was added to your account' };
        return { ...(await applyEmailVerification(trx, token)), message: 'your email address is verified' };
      });
      await announceEmailVerified(s, result);
      ctx.body = { success: true, message: result.message };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/reset-password/request',
      summary: 'Ask for a password reset email',
      description:
        'Always 202 with the same message, whether or not the address has an account, and in the same time: the lookup, the token and the mail are done ' +
        'by a job after the answer. At most one reset mail per address per minute.',
      tags: TAG,
      auth: 'public',
      body: z.object({ email: zEmail() }),
      responses: { 202: { description: '{message}' } },
    },
    async (ctx, { body }) => {
      const s = ctx.services;
      const m = meta(ctx);
      // Only work that is the same for every address happens here (the mail slot and the enqueue): the account lookup,
      // token, audit event and outbox write run in the passwordResets job, so the answer's timing says nothing about the address.
      if (await mailSlot(ctx, 'reset', body.email)) {
        await s.queues.enqueue('passwordResets', { email: body.email, ipAddress: m.ipAddress, userAgent: m.userAgent, acceptLanguage: m.acceptLanguage });
      }
      ctx.status = 202;
      ctx.body = { message: RESET_ACCEPTED };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/reset-password/confirm',
      summary: 'Set a new password with the emailed token',
      description: 'Every session of the user is revoked; clients get forceLogout.',
      tags: TAG,
      auth: 'public',
      body: z.object({ token: zToken(), password: zPassword() }),
      responses: { 200: { description: '{success, message}' }, 400: { description: 'Invalid or expired token' } },
    },
    async (ctx, { body }) => {
      const s = ctx.services;
      const m = meta(ctx);
      const passwordHash = await hashPassword(body.password);
      const { userId, sessionIds, email } = await s.db.transaction(async (trx) => {
        const token = await claimAccountToken(trx, body.token, ['password_reset']);
        if (!token?.user_id) throw badRequest(INVALID_TOKEN);
        const account = await PlatformAccount.query(trx).findById(String(token.payload.platform_account_id)).where('user_id', token.user_id);
        if (!account) throw badRequest(INVALID_TOKEN);
        // Using the link proves the mailbox, so the address counts as verified from now on.
        await PlatformAccount.query(trx).patch({ password_hash: passwordHash, email_verified_at: account.email_verified_at ?? new Date() }).where('id', account.id);
        const sessionIds = await deleteUserSessions(trx, token.user_id);
        await recordAuditEvent({ user_id: token.user_id, actor_id: token.user_id, ip_address: m.ipAddress, user_agent: m.userAgent, event_type: 'password_changed', resource_type: 'platform_account', resource_id: account.id, metadata: { via: 'reset', revoked_sessions: sessionIds.length } }, trx);
        return { userId: token.user_id, sessionIds, email: account.email ?? '' };
      });
      await clearLoginFailures(s.redis, s.config, throttleSubjectForEmail(email));
      await announceSessionsRevoked(s, userId, sessionIds, 'password_reset');
      await s.bus.publishToUser(userId, { type: 'forceLogout', userId, reason: 'password_reset', timestamp: new Date().toISOString() });
      ctx.body = { success: true, message: 'your password was changed; sign in again on every device' };
    },
  );
}
