import type { PlatformAccount } from '../models/PlatformAccount';
import { iso } from './iso';

/** Platform account (spec §2); `platform` must be loaded. Never shows the password hash. */
export function presentPlatformAccount(a: PlatformAccount) {
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
