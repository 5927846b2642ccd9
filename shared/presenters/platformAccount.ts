import type { PlatformAccount } from '../models/PlatformAccount';
import type { Platform } from '../models/Platform';
import { z } from '../zod';
import { iso } from './iso';

/** Platform account (spec §2). */
export const platformAccountSchema = z.object({
  id: z.string(),
  platform_id: z.string(),
  platform_name: z.string().nullable(),
  platform_slug: z.string().nullable(),
  platform_user_id: z.string(),
  is_oauth: z.boolean(),
  is_primary: z.boolean(),
  username: z.string().nullable(),
  email: z.string().nullable(),
  avatar_url: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});

/** Platform account (spec §2); `platform` must be loaded. Never shows the password hash. */
export function presentPlatformAccount(
  a: Omit<PlatformAccount, 'platform'> & { platform?: Pick<Platform, 'slug' | 'name'> },
): z.infer<typeof platformAccountSchema> {
  return {
    id: a.id,
    platform_id: a.platform_id,
    platform_name: a.platform?.name ?? null,
    platform_slug: a.platform?.slug ?? null,
    platform_user_id: a.platform_user_id,
    is_oauth: a.is_oauth,
    is_primary: a.is_primary,
    username: a.username,
    email: a.email,
    avatar_url: a.avatar_url,
    created_at: iso(a.created_at),
    updated_at: iso(a.updated_at),
  };
}
