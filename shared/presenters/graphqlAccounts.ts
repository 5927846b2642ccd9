import type { Platform } from '../models/Platform';
import { actingUserId, Principal } from '../policies';
import { z } from '../zod';

/** A sign-in platform as GraphQL's Platform type shows it. */
export const gqlPlatformSchema = z.object({
  id: z.string(),
  name: z.string(),
  slug: z.string(),
  enabled: z.boolean(),
  twoFactorSupported: z.boolean(),
  twoFactorRequired: z.boolean(),
});

export type GqlPlatformShape = z.infer<typeof gqlPlatformSchema>;

export function presentGqlPlatform(p: Platform): GqlPlatformShape {
  return {
    id: p.id,
    name: p.name,
    slug: p.slug,
    enabled: p.enabled,
    twoFactorSupported: p.two_factor_supported,
    twoFactorRequired: p.two_factor_required,
  };
}

/** The flattened user (shared/presenters/user presentFlatUser) as GraphQL's FlatUser type shows it. */
export const gqlFlatUserSchema = z.object({
  id: z.string(),
  primaryPlatformAccountId: z.string().nullable(),
  username: z.string(),
  email: z.string().nullable(),
  avatarUrl: z.string().nullable(),
  platform: z.string().nullable(),
  createdAt: z.string().nullable(),
  updatedAt: z.string().nullable(),
  lastLoginAt: z.string().nullable(),
  privacyMode: z.boolean(),
  isBanned: z.boolean(),
});

export type GqlFlatUserShape = z.infer<typeof gqlFlatUserSchema>;

/** The REST flat user's fields this reads. */
interface FlatUser {
  id: string;
  primary_platform_account_id: string | null;
  username: string;
  email: string | null;
  avatar_url: string | null;
  platform: string | null;
  created_at: string | null;
  updated_at: string | null;
  last_login_at: string | null;
  privacy_mode: boolean;
  is_banned: boolean;
}

export function presentGqlFlatUser(u: FlatUser): GqlFlatUserShape {
  return {
    id: u.id,
    primaryPlatformAccountId: u.primary_platform_account_id,
    username: u.username,
    email: u.email,
    avatarUrl: u.avatar_url,
    platform: u.platform,
    createdAt: u.created_at,
    updatedAt: u.updated_at,
    lastLoginAt: u.last_login_at,
    privacyMode: u.privacy_mode,
    isBanned: u.is_banned,
  };
}

type Authenticated = Exclude<Principal, { kind: 'anonymous' }>;

/** The caller as GraphQL's Me type shows it. */
export const gqlMeSchema = z.object({
  userId: z.string().nullable(),
  apiKeyId: z.string().nullable(),
  roles: z.array(z.string()),
  permissions: z.array(z.string()),
  isSuperAdmin: z.boolean(),
});

export type GqlMeShape = z.infer<typeof gqlMeSchema>;

/** `roleNames`: the names of the roles the caller holds, sorted (the system key shows as the role System). */
export function presentGqlMe(p: Authenticated, roleNames: string[]): GqlMeShape {
  return {
    userId: actingUserId(p),
    apiKeyId: p.kind === 'user' ? null : p.apiKeyId,
    roles: p.kind === 'system' ? ['System'] : roleNames,
    permissions: p.permissions.list(),
    isSuperAdmin: p.permissions.isSuperAdmin,
  };
}
