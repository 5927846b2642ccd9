import type { Platform } from '../models/Platform';
import type { PlatformAccount } from '../models/PlatformAccount';
import type { User } from '../models/User';
import { z } from '../zod';
import { iso } from './iso';

/** User (spec §2). */
export const userSchema = z.object({
  id: z.string(),
  username: z.string(),
  primary_platform_account_id: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  last_login_at: z.string().nullable(),
  deleted_at: z.string().nullable(),
  privacy_mode: z.boolean(),
  preferred_locale: z.string().nullable(),
  avatars_enabled: z.boolean(),
});

/** Flattened user (spec §2): email, avatar and platform of the primary platform account. */
export const flatUserSchema = z.object({
  id: z.string(),
  primary_platform_account_id: z.string().nullable(),
  username: z.string(),
  email: z.string().nullable(),
  avatar_url: z.string().nullable(),
  platform: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  last_login_at: z.string().nullable(),
  privacy_mode: z.boolean(),
  is_banned: z.boolean(),
});
export type FlatUser = z.infer<typeof flatUserSchema>;

/** User profile (spec §2), answered unwrapped. */
export const profileSchema = z.object({
  name: z.string(),
  display_name: z.string(),
  picture: z.string().nullable(),
  provider: z.string().nullable(),
  primary_provider: z.string().nullable(),
  last_login_at: z.string().nullable(),
  created_at: z.string(),
  privacy_mode: z.boolean(),
  avatars_enabled: z.boolean(),
});

/** User (spec §2). */
export function presentUser(u: User): z.infer<typeof userSchema> {
  return {
    id: u.id,
    username: u.username,
    primary_platform_account_id: u.primary_platform_account_id,
    created_at: iso(u.created_at),
    updated_at: iso(u.updated_at),
    last_login_at: iso(u.last_login_at),
    deleted_at: iso(u.deleted_at),
    privacy_mode: u.privacy_mode,
    preferred_locale: u.preferred_locale,
    avatars_enabled: u.avatars_enabled,
  };
}

/** What the user presenters read of a platform account (a PlatformAccount with `platform` loaded is one). */
export type DisplayedAccount = Pick<PlatformAccount, 'id' | 'username' | 'email' | 'avatar_url' | 'created_at'> & {
  platform?: Pick<Platform, 'slug'>;
};

/** The account a user is shown by: the primary one, else the oldest. */
export function displayAccount<A extends DisplayedAccount>(accounts: A[], primaryId: string | null): A | undefined {
  return (
    accounts.find((a) => a.id === primaryId) ??
    [...accounts].sort((a, b) => +new Date(a.created_at) - +new Date(b.created_at))[0]
  );
}

/**
 * Flattened user of the user-by-email and provider-login responses (spec §2): email, avatar and
 * platform come from the primary platform account. `accounts` must have `platform` loaded.
 */
export function presentFlatUser(u: User, accounts: DisplayedAccount[], isBanned: boolean): FlatUser {
  const main = displayAccount(accounts, u.primary_platform_account_id);
  return {
    id: u.id,
    primary_platform_account_id: u.primary_platform_account_id,
    username: u.username,
    email: main?.email ?? accounts.find((a) => a.email)?.email ?? null,
    avatar_url: u.avatars_enabled ? (main?.avatar_url ?? null) : null,
    platform: main?.platform?.slug ?? null,
    created_at: iso(u.created_at),
    updated_at: iso(u.updated_at),
    last_login_at: iso(u.last_login_at),
    privacy_mode: u.privacy_mode,
    is_banned: isBanned,
  };
}

/**
 * User profile (spec §2): `name` is the username, `display_name` the name on the primary account,
 * `provider` the platform of the most recent sign-in, `primary_provider` the primary account's.
 */
export function presentProfile(
  u: User,
  accounts: DisplayedAccount[],
  lastProvider: string | null,
): z.infer<typeof profileSchema> {
  const main = displayAccount(accounts, u.primary_platform_account_id);
  return {
    name: u.username,
    display_name: main?.username ?? u.username,
    picture: u.avatars_enabled ? (main?.avatar_url ?? null) : null,
    provider: lastProvider ?? main?.platform?.slug ?? null,
    primary_provider: main?.platform?.slug ?? null,
    last_login_at: iso(u.last_login_at),
    created_at: iso(u.created_at),
    privacy_mode: u.privacy_mode,
    avatars_enabled: u.avatars_enabled,
  };
}
