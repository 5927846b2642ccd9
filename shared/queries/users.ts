import type { Knex } from 'knex';
import { Ban } from '../models/Ban';
import { Platform } from '../models/Platform';
import { PlatformAccount } from '../models/PlatformAccount';
import { User } from '../models/User';
import { normaliseEmail } from '../domain/accounts';
import { FlatUser, presentFlatUser } from '../presenters/user';
import { isUuid } from '../zod';
import { findActiveBan } from './access';

/** Whether a username is taken (case-insensitively), optionally ignoring one user. */
export async function usernameTaken(db: Knex, username: string, exceptUserId?: string): Promise<boolean> {
  const q = db('users').whereRaw('lower(username) = lower(?)', [username]);
  if (exceptUserId) q.whereNot('id', exceptUserId);
  return !!(await q.first('id'));
}

/** The platform by id or slug. */
export async function findPlatform(db: Knex, idOrSlug: string): Promise<Platform | undefined> {
  return Platform.query(db)
    .where((q) => (isUuid(idOrSlug) ? q.where('id', idOrSlug).orWhere('slug', idOrSlug) : q.where('slug', idOrSlug)))
    .first();
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
export async function findUserIdByEmail(
  db: Knex,
  email: string,
  opts: { exceptUserId?: string; verifiedOnly?: boolean } = {},
): Promise<string | undefined> {
  const q = db('platform_accounts as pa')
    .join('users as u', 'u.id', 'pa.user_id')
    .join('platforms as p', 'p.id', 'pa.platform_id')
    .whereRaw('lower(pa.email) = ?', [normaliseEmail(email)])
    .whereNull('u.deleted_at')
    .orderByRaw(
      "(p.slug = 'email') desc, (pa.email_verified_at is not null) desc, pa.is_primary desc, pa.created_at asc",
    )
    .first('pa.user_id');
  if (opts.exceptUserId) q.whereNot('pa.user_id', opts.exceptUserId);
  if (opts.verifiedOnly) q.whereNotNull('pa.email_verified_at');
  return (await q)?.user_id;
}

/** Whether an address is used by any platform account of another live user (verified or not). */
export async function emailInUse(db: Knex, email: string, exceptUserId?: string): Promise<boolean> {
  return !!(await findUserIdByEmail(db, email, { exceptUserId }));
}

/** Whether one of the user's own platform accounts carries this (lowercased) address. */
export async function ownsEmail(db: Knex, userId: string, email: string): Promise<boolean> {
  return !!(await db('platform_accounts').where('user_id', userId).whereRaw('lower(email) = ?', [email]).first('id'));
}

/** A user's platform accounts with their platforms, oldest first. */
export async function userAccounts(db: Knex, userId: string): Promise<PlatformAccount[]> {
  return PlatformAccount.query(db)
    .where('user_id', userId)
    .withGraphFetched('platform')
    .orderBy('created_at', 'asc')
    .orderBy('id');
}

/** The platform of the user's most recent sign-in that named one (profile `provider`). */
export async function lastSignInPlatform(db: Knex, userId: string): Promise<string | null> {
  const last = await db('sessions')
    .where('user_id', userId)
    .whereNotNull('platform_slug')
    .orderBy('created_at', 'desc')
    .first('platform_slug');
  return last?.platform_slug ?? null;
}

/** The flattened user (spec §2) of a user id. */
export async function flatUser(db: Knex, userId: string): Promise<FlatUser> {
  const user = await User.query(db).findById(userId);
  if (!user) throw new Error(`user ${userId} vanished`);
  const [accounts, ban] = await Promise.all([userAccounts(db, userId), findActiveBan(db, userId)]);
  return presentFlatUser(user, accounts, !!ban);
}

/** Every ban of a user, newest first. */
export async function banHistory(db: Knex, userId: string): Promise<Ban[]> {
  return Ban.query(db).where('user_id', userId).orderBy('banned_at', 'desc').orderBy('id');
}

/** Whether the user holds the role (a direct assignment). */
export async function hasRole(db: Knex, userId: string, roleId: string): Promise<boolean> {
  return !!(await db('user_roles').where({ user_id: userId, role_id: roleId }).first('role_id'));
}
