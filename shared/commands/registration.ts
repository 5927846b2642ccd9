import type { Knex } from 'knex';
import { attributed, recordAuditEvent } from '../audit';
import { reserveRegistration } from '../caches/loginThrottle';
import { withMailSlot } from '../caches/mailSlots';
import type { ServiceContext } from '../context';
import { afterCommit, transaction } from '../db';
import { normaliseEmail } from '../domain/accounts';
import { hashPassword } from '../domain/passwords';
import { emailLocale } from '../emails/accountEmails';
import { writeAccountEmail } from '../emails/outbox';
import { badRequest, forbidden, tooManyRequests } from '../errors';
import { AccountToken } from '../models/AccountToken';
import { User } from '../models/User';
import {
  emailPlatform,
  emailSignInExists,
  findEmailAccountByAddress,
  findUserIdByEmail,
  userAccounts,
} from '../queries/users';
import { claimAccountToken, issueAccountToken } from './accountTokens';
import { EmailRequest, INVALID_TOKEN } from './emailFlows';
import { createVerifiedEmailUser } from './users';

const REGISTRATION_DISABLED = 'registration with email is disabled';

/** Email/password registration is possible only while the email platform is enabled. */
async function assertRegistrationEnabled(db: ServiceContext['db']): Promise<void> {
  if (!(await emailPlatform(db)).enabled) throw forbidden(REGISTRATION_DISABLED);
}

/**
 * Starts an email/password registration: a verification mail (registration token) to a free
 * address, an "account exists" mail to the owner of a taken one, nothing when a mail of that kind
 * went to the address within the minute. The caller answers the same in every case. Each one is
 * counted on the client IP's registration counter first (none when `clientIp` is unknown, as
 * sign-in); past its limit the answer is 429 with Retry-After, before any hash or mail.
 */
export async function startRegistration(
  ctx: ServiceContext,
  input: { email: string; password: string; username?: string; locale?: string },
  clientIp: string | null,
  meta: EmailRequest,
): Promise<void> {
  await assertRegistrationEnabled(ctx.db);
  if (clientIp) {
    const tier = ctx.config.rateLimit.register;
    const { retryAfterSeconds } = await reserveRegistration(ctx.db, clientIp, tier);
    if (retryAfterSeconds > 0)
      throw tooManyRequests(
        `too many registrations from this IP address; try again in ${retryAfterSeconds} seconds`,
        tier.limit,
        retryAfterSeconds,
      );
  }
  // Hash in both branches so the response time does not tell taken and free addresses apart. Not
  // skipped when the address's mail slot is taken either: the answer would then come faster for an
  // address someone registered within the minute, and a client varying addresses would pay the
  // hash anyway (the IP counter above is what bounds it).
  const passwordHash = await hashPassword(input.password);
  const { email } = input;
  const ownerId =
    (await findEmailAccountByAddress(ctx.db, email))?.user_id ??
    (await findUserIdByEmail(ctx.db, email, { verifiedOnly: true }));
  // A mail went to this address within the minute: same answer, no second mail. A write that
  // fails gives the slot back (withMailSlot), so the retry of a 503 is mailed.
  await withMailSlot(ctx.redis, ctx.config, 'register', email, async () => {
    // Held by a deleted account that can still be restored: a registration link could only fail
    // (409), and an "account exists" mail would point at an account that cannot sign in. Same answer, no mail.
    if (!ownerId && (await emailSignInExists(ctx.db, email))) return;
    await writeRegistrationMail(ctx, { ...input, passwordHash, ownerId }, meta);
  });
}

/** The registration link, or the "account exists" mail to the owner of a taken address, in one transaction. */
async function writeRegistrationMail(
  ctx: ServiceContext,
  input: { email: string; passwordHash: string; ownerId: string | undefined; username?: string; locale?: string },
  meta: EmailRequest,
): Promise<void> {
  const { email, passwordHash, ownerId } = input;
  await transaction(ctx.db, async (trx) => {
    afterCommit(trx, () => ctx.outbox.wake());
    if (ownerId) {
      const owner = await User.query(trx).findById(ownerId);
      const providers = [...new Set((await userAccounts(trx, ownerId)).map((a) => a.platform?.name ?? ''))].filter(
        Boolean,
      );
      return writeAccountEmail(trx, ctx.config, {
        to: email,
        userId: ownerId,
        template: 'account_exists',
        locale: emailLocale(owner?.preferred_locale, input.locale ?? meta.acceptLanguage),
        vars: { email, providers },
      });
    }
    const { token, row } = await issueAccountToken(trx, {
      purpose: 'registration',
      userId: null,
      email,
      payload: { password_hash: passwordHash, username: input.username ?? null, locale: input.locale ?? null },
    });
    return writeAccountEmail(trx, ctx.config, {
      to: email,
      userId: null,
      template: 'registration',
      locale: emailLocale(input.locale, meta.acceptLanguage),
      token,
      vars: { expiresAt: row.expires_at, email },
    });
  });
}

/**
 * The registration's token and mails came before the user and name none: they are tied to it now,
 * so the purge of the account finds them by its id, also once the address has changed (the mails
 * keep their address and text until their 30 days are over). Every registration mail to the
 * address that names no user went to the mailbox this registration proved.
 */
async function tieRegistrationToUser(trx: Knex.Transaction, token: AccountToken, userId: string): Promise<void> {
  await AccountToken.query(trx).patch({ user_id: userId }).where('id', token.id);
  await trx('email_outbox')
    .whereNull('user_id')
    .where('template', 'registration')
    .whereRaw('lower(to_address) = ?', [normaliseEmail(token.email!)])
    .update({ user_id: userId });
}

/**
 * Finishes a registration with its emailed token: creates the user (User role) with a verified
 * email sign-in and records `user_created`. Returns the new user's id.
 */
export async function completeRegistration(ctx: ServiceContext, token: string, meta: EmailRequest): Promise<string> {
  return transaction(ctx.db, async (trx) => {
    const row = await claimAccountToken(trx, token, ['registration']);
    if (!row?.email) throw badRequest(INVALID_TOKEN);
    await assertRegistrationEnabled(trx);
    // A taken name is not an error: registration did not check it (no enumeration); createVerifiedEmailUser picks a free one close to it.
    const username = typeof row.payload.username === 'string' ? row.payload.username : null;
    const locale =
      typeof row.payload.locale === 'string' && row.payload.locale
        ? row.payload.locale.toLowerCase().slice(0, 10)
        : null;
    const passwordHash = String(row.payload.password_hash);
    const { user, account } = await createVerifiedEmailUser(trx, { email: row.email, passwordHash, username, locale });
    await tieRegistrationToUser(trx, row, user.id);
    await recordAuditEvent(
      attributed(
        { ...meta, actorId: user.id },
        {
          user_id: user.id,
          event_type: 'user_created',
          resource_type: 'user',
          resource_id: user.id,
          metadata: { platform: 'email', platform_account_id: account.id },
        },
      ),
      trx,
    );
    return user.id;
  });
}
