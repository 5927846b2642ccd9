import type { Knex } from 'knex';
import type { ServiceContext } from '../context';
import { emailLocale } from '../emails/accountEmails';
import { writeAccountEmail } from '../emails/outbox';
import { badRequest, conflict, notFound, tooManyRequests } from '../errors';
import { ADDRESS_MAILS_PER_HOUR, claimAddressMail, giveBackAddressMail } from '../caches/mailSlots';
import type { AccountToken, AccountTokenPurpose } from '../models/AccountToken';
import { PlatformAccount } from '../models/PlatformAccount';
import { User } from '../models/User';
import { claimAccountToken, issueAccountToken } from './accountTokens';
import { peekAccountToken } from '../queries/accountTokens';
import { hashPassword } from '../domain/passwords';
import { attributed, Attribution, recordAuditEvent } from '../audit';
import { afterCommit, transaction } from '../db';
import { addPlatformAccount, releaseUnprovenClaims } from './users';
import {
  emailProvenElsewhere,
  emailPlatform,
  findEmailAccount,
  findEmailAccountByAddress,
  lockEmailAddress,
} from '../queries/users';

/** The one message for every unusable token (unknown, used, expired, someone else's). */
export const INVALID_TOKEN = 'invalid or expired token';

/**
 * Who asks and from where, with the language their client prefers (the mail's locale when the
 * user chose none). The actor may be unknown (anonymous requests, jobs): the token's user then.
 */
export interface EmailRequest extends Partial<Attribution> {
  acceptLanguage?: string | null;
}

/** The attribution of an event on `userId`'s account: the caller when known, else the user. */
const actingOn = (meta: EmailRequest, userId: string): Attribution => ({ ...meta, actorId: meta.actorId ?? userId });

async function liveUser(db: Knex, userId: string): Promise<User> {
  const user = await User.query(db).findById(userId).whereNull('deleted_at');
  if (!user) throw notFound('user');
  return user;
}

/**
 * Locks what using an emailed token changes, before the token is claimed: the address it gives
 * (email change, email link), then the user's row, in the order of every writer of a user's
 * addresses and sign-ins (the sign-ins and cancelDeletion take the address before the user row),
 * and the token last, as its issuers and a purge reach the tokens after the user. The user's row
 * makes the checks of the account's sign-ins and their write one step: two links verified at once
 * gave one user two email sign-ins (the race34 audit). A token of a deleted account is as unusable
 * as any other (400, not 404). Returns the user.
 */
async function lockTokenUser(trx: Knex.Transaction, token: AccountToken): Promise<User> {
  const email = token.purpose === 'email_change' ? token.payload.new_email : token.payload.email;
  if ((token.purpose === 'email_change' || token.purpose === 'email_link') && typeof email === 'string')
    await lockEmailAddress(trx, email);
  const user = await User.query(trx).findById(token.user_id!).whereNull('deleted_at').forUpdate();
  if (!user) throw badRequest(INVALID_TOKEN);
  return user;
}

/**
 * Runs `write` (the mail's database write) under the per-address and per-user bound on mails a
 * signed-in user sends to an address of their choosing (shared/caches/mailSlots.ts): 429 with
 * Retry-After past it.
 */
/** Refusals of an address another account holds: counted like a mail (withMailTo). */
const addressInUseRefusals = new WeakSet<object>();
function addressInUse(): Error {
  const err = conflict('email is already in use');
  addressInUseRefusals.add(err);
  return err;
}

async function withMailTo<T>(ctx: ServiceContext, userId: string, email: string, write: () => Promise<T>): Promise<T> {
  const { wait, claimed, limit } = await claimAddressMail(ctx.redis, ctx.config, userId, email);
  if (wait > 0)
    throw tooManyRequests(
      `one mail per address per minute and ${ADDRESS_MAILS_PER_HOUR} per account per hour; try again in ${wait} s`,
      limit,
      wait,
    );
  try {
    return await write();
  } catch (err) {
    // Not written (a 503, a conflict to retry, say): the claim is given back, so the retry is not
    // refused for a mail that never went out. Only the answer that the address is taken keeps it,
    // so that answer cannot be used to test addresses without bound.
    if (claimed && !addressInUseRefusals.has(err as object))
      await giveBackAddressMail(ctx.redis, ctx.config, userId, email);
    throw err;
  }
}

/**
 * Email change (spec §4.11, accounts with an email sign-in only): a 24-hour token goes to the new
 * address; nothing changes until it is used. A new request replaces the pending one.
 */
export async function requestEmailChange(
  ctx: ServiceContext,
  userId: string,
  newEmail: string,
  meta: EmailRequest,
): Promise<{ expiresAt: Date }> {
  const user = await liveUser(ctx.db, userId);
  const account = await findEmailAccount(ctx.db, userId);
  if (!account)
    throw badRequest('this account has no email sign-in; link an email address with /email-link/request instead');
  if (account.email?.toLowerCase() === newEmail) throw badRequest('email: this is already the address of the account');
  // Counted like a mail sent (withMailTo): whether an address is taken is told at the same pace.
  const expiresAt = await withMailTo(ctx, userId, newEmail, async () => {
    if (await emailProvenElsewhere(ctx.db, newEmail, userId)) throw addressInUse();
    return transaction(ctx.db, async (trx) => {
      afterCommit(trx, () => ctx.outbox.wake());
      const { token, row } = await issueAccountToken(trx, {
        purpose: 'email_change',
        userId,
        email: newEmail,
        payload: { new_email: newEmail, platform_account_id: account.id },
      });
      await writeAccountEmail(trx, ctx.config, {
        to: newEmail,
        userId,
        template: 'email_change',
        locale: emailLocale(user.preferred_locale, meta.acceptLanguage),
        token,
        vars: { expiresAt: row.expires_at, username: user.username, email: newEmail },
      });
      return row.expires_at;
    });
  });
  return { expiresAt };
}

/**
 * Applies a claimed email_change token inside `trx` (its address and user locked by
 * lockTokenUser); 409 when the address was taken meanwhile.
 */
async function applyEmailChange(
  trx: Knex.Transaction,
  token: AccountToken,
  meta: EmailRequest,
): Promise<{ userId: string; email: string }> {
  const userId = token.user_id!;
  const email = String(token.payload.new_email);
  if (await emailProvenElsewhere(trx, email, userId)) throw conflict('email is already in use');
  const account = await findEmailAccount(trx, userId);
  if (!account) throw badRequest(INVALID_TOKEN);
  await PlatformAccount.query(trx)
    .patch({ email, platform_user_id: email, email_verified_at: new Date() })
    .where('id', account.id);
  await releaseUnprovenClaims(trx, email, userId, actingOn(meta, userId));
  await recordAuditEvent(
    attributed(actingOn(meta, userId), {
      user_id: userId,
      event_type: 'user_updated',
      resource_type: 'platform_account',
      resource_id: account.id,
      metadata: { action: 'email_changed', previous_email: account.email, email },
    }),
    trx,
  );
  return { userId, email };
}

/**
 * Email link (spec §4.12): adds an email/password sign-in to an account that has none. The
 * password is hashed (argon2id) now; the account appears only when the 24-hour token is used.
 */
export async function requestEmailLink(
  ctx: ServiceContext,
  userId: string,
  email: string,
  password: string,
  meta: EmailRequest,
): Promise<{ expiresAt: Date }> {
  const user = await liveUser(ctx.db, userId);
  if (await findEmailAccount(ctx.db, userId))
    throw badRequest('this account already has an email sign-in; change its address with /email/request-change');
  // Counted like a mail sent (withMailTo): whether an address is taken is told at the same pace.
  const expiresAt = await withMailTo(ctx, userId, email, async () => {
    if (await emailProvenElsewhere(ctx.db, email, userId)) throw addressInUse();
    const passwordHash = await hashPassword(password);
    return transaction(ctx.db, async (trx) => {
      afterCommit(trx, () => ctx.outbox.wake());
      const { token, row } = await issueAccountToken(trx, {
        purpose: 'email_link',
        userId,
        email,
        payload: { email, password_hash: passwordHash },
      });
      await writeAccountEmail(trx, ctx.config, {
        to: email,
        userId,
        template: 'email_link',
        locale: emailLocale(user.preferred_locale, meta.acceptLanguage),
        token,
        vars: { expiresAt: row.expires_at, username: user.username, email },
      });
      return row.expires_at;
    });
  });
  return { expiresAt };
}

/**
 * Applies a claimed email_link token inside `trx` (its address and `user` locked by
 * lockTokenUser): creates the email platform account; 409 when the user has one already.
 */
async function applyEmailLink(
  trx: Knex.Transaction,
  token: AccountToken,
  user: User,
  meta: EmailRequest,
): Promise<{ userId: string; platformAccountId: string }> {
  const userId = token.user_id!;
  const email = String(token.payload.email);
  if (await findEmailAccount(trx, userId)) throw conflict('this account already has an email sign-in');
  if (await emailProvenElsewhere(trx, email, userId)) throw conflict('email is already in use');
  const platform = await emailPlatform(trx);
  const account = await addPlatformAccount(trx, userId, {
    platformId: platform.id,
    platformUserId: email,
    isOauth: false,
    username: user.username,
    email,
    passwordHash: String(token.payload.password_hash),
    emailVerifiedAt: new Date(),
  });
  await releaseUnprovenClaims(trx, email, userId, actingOn(meta, userId));
  await recordAuditEvent(
    attributed(actingOn(meta, userId), {
      user_id: userId,
      event_type: 'account_linked',
      resource_type: 'platform_account',
      resource_id: account.id,
      metadata: { platform: 'email' },
    }),
    trx,
  );
  return { userId, platformAccountId: account.id };
}

/** Applies a claimed email_verification token: the email sign-in's address counts as proven. */
async function applyEmailVerification(trx: Knex.Transaction, token: AccountToken): Promise<{ userId: string }> {
  const userId = token.user_id!;
  const account = await findEmailAccount(trx, userId);
  // The address may have changed since the mail went out: only the address it was sent to is proven.
  if (!account || account.email?.toLowerCase() !== token.email) throw badRequest(INVALID_TOKEN);
  await PlatformAccount.query(trx).patch({ email_verified_at: new Date() }).where('id', account.id);
  return { userId };
}

/** Sends a fresh email_verification token to the address of the user's email sign-in. */
export async function sendEmailVerification(ctx: ServiceContext, userId: string, meta: EmailRequest): Promise<void> {
  const user = await liveUser(ctx.db, userId);
  const account = await findEmailAccount(ctx.db, userId);
  if (!account?.email) return;
  const email = account.email.toLowerCase();
  await transaction(ctx.db, async (trx) => {
    afterCommit(trx, () => ctx.outbox.wake());
    const { token, row } = await issueAccountToken(trx, { purpose: 'email_verification', userId, email });
    return writeAccountEmail(trx, ctx.config, {
      to: email,
      userId,
      template: 'email_verification',
      locale: emailLocale(user.preferred_locale, meta.acceptLanguage),
      token,
      vars: { expiresAt: row.expires_at, username: user.username, email },
    });
  });
}

/**
 * Password reset, run by the `passwordResets` job after the anonymous request was answered: when
 * the address has an email sign-in, issues the reset token, records `password_reset_requested` and
 * queues the mail. An unknown address does nothing. Returns whether a mail was queued.
 */
export async function issuePasswordReset(ctx: ServiceContext, email: string, meta: EmailRequest): Promise<boolean> {
  const account = await findEmailAccountByAddress(ctx.db, email);
  if (!account) return false;
  const user = await User.query(ctx.db).findById(account.user_id);
  await transaction(ctx.db, async (trx) => {
    afterCommit(trx, () => ctx.outbox.wake());
    const userId = account.user_id;
    const { token, row } = await issueAccountToken(trx, {
      purpose: 'password_reset',
      userId,
      email,
      payload: { platform_account_id: account.id },
    });
    await recordAuditEvent(
      attributed(
        { ...meta, actorId: null },
        {
          user_id: userId,
          event_type: 'password_reset_requested',
          resource_type: 'platform_account',
          resource_id: account.id,
        },
      ),
      trx,
    );
    return writeAccountEmail(trx, ctx.config, {
      to: email,
      userId: account.user_id,
      template: 'password_reset',
      locale: emailLocale(user?.preferred_locale, meta.acceptLanguage),
      token,
      vars: { expiresAt: row.expires_at, username: user?.username },
    });
  });
  return true;
}

/** After the commit of an email change or link: the user's clients hear of it. */
async function announceEmailVerified(
  ctx: ServiceContext,
  result: { userId: string; email?: string; platformAccountId?: string },
): Promise<void> {
  const timestamp = new Date().toISOString();
  if (result.platformAccountId)
    await ctx.bus.publishToUser(result.userId, {
      type: 'emailLinkVerified',
      userId: result.userId,
      platformAccountId: result.platformAccountId,
      timestamp,
    });
  else if (result.email)
    await ctx.bus.publishToUser(result.userId, {
      type: 'emailChangeVerified',
      userId: result.userId,
      email: result.email,
      timestamp,
    });
}

/** What using an emailed token did: which kind it was, whose account, the new address or account. */
export interface UsedEmailToken {
  purpose: AccountTokenPurpose;
  userId: string;
  email?: string;
  platformAccountId?: string;
}

/**
 * Uses an emailed token of one of `purposes` (address verification, email change, email link):
 * claims it, applies it and, after the commit, tells the user's clients. 400 for an unusable
 * token, 409 when the address was taken meanwhile. Whether the caller may use it is decided before.
 */
export async function useEmailToken(
  ctx: ServiceContext,
  token: string,
  purposes: AccountTokenPurpose[],
  meta: EmailRequest,
): Promise<UsedEmailToken> {
  return transaction(ctx.db, async (trx) => {
    const found = await peekAccountToken(trx, token, purposes);
    if (!found?.user_id) throw badRequest(INVALID_TOKEN);
    const user = await lockTokenUser(trx, found);
    // Claimed after the locks: a token a newer request replaced while this one waited is gone (400).
    const row = await claimAccountToken(trx, token, purposes);
    if (!row) throw badRequest(INVALID_TOKEN);
    let result: { userId: string; email?: string; platformAccountId?: string };
    if (row.purpose === 'email_change') result = await applyEmailChange(trx, row, meta);
    else if (row.purpose === 'email_link') result = await applyEmailLink(trx, row, user, meta);
    else result = await applyEmailVerification(trx, row);
    afterCommit(trx, () => announceEmailVerified(ctx, result));
    return { purpose: row.purpose, ...result };
  });
}
