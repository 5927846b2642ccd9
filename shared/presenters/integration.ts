import type { Integration } from '../models/Integration';
import type { IntegrationPlatform } from '../integrations/platforms';
import type { ChannelStats } from '../integrations/streamClient';
import { z } from '../zod';
import { iso } from './iso';

/** Integration (spec §2): never a token, sealed or not. */
export const integrationSchema = z.object({
  id: z.string().uuid(),
  user_id: z.string().uuid(),
  platform_slug: z.string(),
  platform_name: z.string(),
  platform_user_id: z.string(),
  username: z.string(),
  display_name: z.string().nullable(),
  profile_image_url: z.string().nullable(),
  scopes: z.array(z.string()),
  is_active: z.boolean(),
  bot_status: z.enum(['active', 'paused', 'disabled']),
  connected_at: z.string(),
  last_refreshed_at: z.string().nullable(),
});

/** Integration channel stats (spec §2). */
export const channelStatsSchema = z.object({
  followers: z.number().int(),
  subscribers: z.number().int(),
  current_viewers: z.number().int(),
  is_live: z.boolean(),
  stream_title: z.string().nullable(),
  game_name: z.string().nullable(),
  updated_at: z.string(),
});

export const platformSchema = z.object({
  slug: z.string(),
  name: z.string(),
  description: z.string(),
  icon_url: z.string().nullable(),
  enabled: z.boolean(),
  features: z.array(z.string()),
});

export const platformScopesSchema = z.object({
  platform: z.string(),
  scopes: z.array(z.object({ name: z.string(), description: z.string(), required: z.boolean() })),
});

/** `platformName` comes from the platform catalogue (shared/integrations/platforms.ts), not the row. */
export function presentIntegration(i: Integration, platformName: string): z.infer<typeof integrationSchema> {
  return {
    id: i.id,
    user_id: i.user_id,
    platform_slug: i.platform_slug,
    platform_name: platformName,
    platform_user_id: i.platform_user_id,
    username: i.username,
    display_name: i.display_name,
    profile_image_url: i.profile_image_url,
    scopes: i.scopes ?? [],
    is_active: i.is_active,
    bot_status: i.bot_status,
    connected_at: iso(i.connected_at),
    last_refreshed_at: iso(i.last_refreshed_at),
  };
}

export function presentChannelStats(s: ChannelStats, at: Date): z.infer<typeof channelStatsSchema> {
  return { ...s, updated_at: iso(at) };
}

export function presentPlatform(p: IntegrationPlatform, enabled: boolean): z.infer<typeof platformSchema> {
  return {
    slug: p.slug,
    name: p.name,
    description: p.description,
    icon_url: p.icon_url,
    enabled,
    features: p.features,
  };
}

export function presentPlatformScopes(p: IntegrationPlatform): z.infer<typeof platformScopesSchema> {
  return { platform: p.slug, scopes: p.scopes.map((s) => ({ ...s })) };
}
