import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { conflict } from '../errors';
import { Ban } from '../models/Ban';
import { Platform } from '../models/Platform';
import { PlatformAccount } from '../models/PlatformAccount';
import { User } from '../models/User';
import { DEFAULT_USER_ROLE_ID } from '../permissions';
import { presentFlatUser } from '../presenters/user';
import { z, isUuid } from '../zod';
import { findActiveBan } from '../queries/access';

/** Spec §8: 3-30 characters, letters, digits, underscore. */
export const USERNAME_PATTERN = /^[A-Za-z0-9_]{3,30}$/;

/** A username field (400 naming the field when invalid). */
export const zUsername = () =>
  z.string().regex(USERNAME_PATTERN, { message: 'must be 3-30 characters of letters, digits and underscore' });

/** Email addresses are compared and stored lowercased. */
export const normaliseEmail = (email: string) => email.trim().toLowerCase();

/** An email field, trimmed and lowercased. */
export const zEmail = () =>
  z
    .string()
    .trim()
    .max(320, { message: 'must be at most 320 characters' })
    .email({ message: 'must be an email address' })
    .transform(normaliseEmail);

/** Whether a username is taken (case-insensitively), optionally ignoring one user. */
export async function usernameTaken(db: Knex, username: string, exceptUserId?: string): Promise<boolean> {
  const q = db('users').whereRaw('lower(username) = lower(?)', [username]);
  if (exceptUserId) q.whereNot('id', exceptUserId);
  return !!(await q.first('id'));
}

/**
 * A free username derived from a display name or email local part: invalid characters become
 * underscores, and a short random suffix is added while the name is taken.
 */
export async function uniqueUsername(db: Knex, base: string): Promise<string> {
  let name = base.normalize('NFKD').replace(/[^A-Za-z0-9_]+/g, '_').replace(/_+/g, '_').replace(/^_|_$/g, '').slice(0, 24);
  if (name.length < 3) name = `user${name ? '_' + name : ''}`.slice(0, 24);
  if (!(await usernameTaken(db, name))) return name;
  for (let i = 0; i < 20; i++) {
    // 23 + '_' + 6 hex = 30, the longest username allowed (24 + '_' + 6 overflowed the column: a 500).
    const candidate = `${name.slice(0, 23)}_${randomBytes(3).toString('hex')}`;
    if (!(await usernameTaken(db, candidate))) return candidate;
  }
  throw new Error('could not find a free username');
}

/** The platform by id or slug. */
export async function findPlatform(db: Knex, idOrSlug: string): Promise<Platform | undefined> {
  return Platform.query(db).where((q) => (isUuid(idOrSlug) ? q.where('id', idOrSlug).orWhere('slug', idOrSlug) : q.where('slug', idOrSlug))).first();
}

/** The email/password platform (slug `email`). */
export async function emailPlatform(db: Knex): Promise<Platform> {
  const p = await Platform.query(db).findOne({ slug: 'email' });
  if (!p) throw new Error('the email platform is missing: run the seed');
  return p;
}

/** The user's email/password account, if they have one. */
export async function findEmailAccount(db: Knex, userId: string): Promise<PlatformAccount | undefined> {
  return PlatformAccount.query(db)
    .joinRelated('platform')
    .where('platform.slug', 'email')
    .where('platform_accounts.user_id', userId)
    .select('platform_accounts.*')
    .first();
}

/** The email/password account with this address (live users only), for sign-in. */
export async function findEmailAccountByAddress(db: Knex, email: string): Promise<PlatformAccount | undefined> {
  return PlatformAccount.query(db)
    .joinRelated('platform')
    .join('users', 'users.id', 'platform_accounts.user_id')
    .where('platform.slug', 'email')
    .whereRaw('lower(platform_accounts.email) = ?', [normaliseEmail(email)])
    .whereNull('users.deleted_at')
    .select('platform_accounts.*')
    .first();
}

/**
 * The live user an address belongs to: the owner of an email/password account with it first,
 * then verified, primary and older accounts. With `verifiedOnly` only addresses proven by a
 * verification mail or supplied by a sign-in provider count: what linking by email relies on, so
 * an address a user merely typed into a profile never pulls someone else's sign-in into their account.
 */
export async function findUserIdByEmail(db: Knex, email: string, opts: { exceptUserId?: string; verifiedOnly?: boolean } = {}): Promise<string | undefined> {
  const q = db('platform_accounts as pa')
    .join('users as u', 'u.id', 'pa.user_id')
    .join('platforms as p', 'p.id', 'pa.platform_id')
    .whereRaw('lower(pa.email) = ?', [normaliseEmail(email)])
    .whereNull('u.deleted_at')
    .orderByRaw("(p.slug = 'email') desc, (pa.email_verified_at is not null) desc, pa.is_primary desc, pa.created_at asc")
    .first('pa.user_id');
  if (opts.exceptUserId) q.whereNot('pa.user_id', opts.exceptUserId);
  if (opts.verifiedOnly) q.whereNotNull('pa.email_verified_at');
  return (await q)?.user_id;
}

/** Whether an address is used by any platform account of another live user (verified or not). */
export async function emailInUse(db: Knex, email: string, exceptUserId?: string): Promise<boolean> {
  return !!(await findUserIdByEmail(db, email, { exceptUserId }));
}

export interface NewAccount {
  platformId: string;
  platformUserId: string;
  isOauth: boolean;
  username?: string | null;
  email?: string | null;
  avatarUrl?: string | null;
  passwordHash?: string | null;
  emailVerifiedAt?: Date | null;
}

/**
 * Creates a user with their first platform account (primary) and the User role: every new user,
 * whichever way they signed up, gets role_user.
 */
export async function createUserWithAccount(trx: Knex.Transaction, input: { username: string; preferredLocale?: string | null; lastLoginAt?: Date | null; account: NewAccount }): Promise<{ user: User; account: PlatformAccount }> {
  const user = await User.query(trx).insertAndFetch({ username: input.username, preferred_locale: input.preferredLocale ?? null, last_login_at: input.lastLoginAt ?? null });
  const account = await addPlatformAccount(trx, user.id, input.account, true);
  await User.query(trx).patch({ primary_platform_account_id: account.id }).where('id', user.id);
  await trx('user_roles').insert({ user_id: user.id, role_id: DEFAULT_USER_ROLE_ID }).onConflict(['user_id', 'role_id']).ignore();
  user.primary_platform_account_id = account.id;
  return { user, account };
}

/**
 * Creates a user whose email/password sign-in counts as verified, with the User role: what finishing
 * a registration does (POST /v1/auth/register/verify) and what `cli create-admin` does. 409 when the
 * address belongs to a live account; a missing or taken username falls back to one derived from
 * the address. The caller checks that email sign-in is enabled when that matters to it.
 */
export async function createVerifiedEmailUser(
  trx: Knex.Transaction,
  input: { email: string; passwordHash: string; username?: string | null; locale?: string | null },
): Promise<{ user: User; account: PlatformAccount }> {
  const email = normaliseEmail(input.email);
  if ((await findEmailAccountByAddress(trx, email)) || (await findUserIdByEmail(trx, email, { verifiedOnly: true }))) throw conflict('email is already in use');
  const platform = await emailPlatform(trx);
  const username = input.username && !(await usernameTaken(trx, input.username)) ? input.username : await uniqueUsername(trx, input.username ?? email.split('@')[0]);
  return createUserWithAccount(trx, {
    username,
    preferredLocale: input.locale ?? null,
    account: { platformId: platform.id, platformUserId: email, isOauth: false, username, email, passwordHash: input.passwordHash, emailVerifiedAt: new Date() },
  });
}

/** Adds a platform account to an existing user. */
export async function addPlatformAccount(trx: Knex.Transaction, userId: string, a: NewAccount, primary = false): Promise<PlatformAccount> {
  return PlatformAccount.query(trx).insertAndFetch({
    user_id: userId,
    platform_id: a.platformId,
    platform_user_id: a.platformUserId,
    is_oauth: a.isOauth,
    is_primary: primary,
    username: a.username ?? null,
    email: a.email ?? null,
    avatar_url: a.avatarUrl ?? null,
    password_hash: a.passwordHash ?? null,
    email_verified_at: a.emailVerifiedAt ?? null,
  });
}

/** A user's platform accounts with their platforms, oldest first. */
export async function userAccounts(db: Knex, userId: string): Promise<PlatformAccount[]> {
  return PlatformAccount.query(db).where('user_id', userId).withGraphFetched('platform').orderBy('created_at', 'asc').orderBy('id');
}

/** The flattened user (spec §2) of a user id. */
export async function flatUser(db: Knex, userId: string) {
  const user = await User.query(db).findById(userId);
  if (!user) throw new Error(`user ${userId} vanished`);
  const [accounts, ban] = await Promise.all([userAccounts(db, userId), findActiveBan(db, userId)]);
  return presentFlatUser(user, accounts, !!ban);
}

/** Every ban of a user, newest first. */
export async function banHistory(db: Knex, userId: string): Promise<Ban[]> {
  return Ban.query(db).where('user_id', userId).orderBy('banned_at', 'desc').orderBy('id');
}
