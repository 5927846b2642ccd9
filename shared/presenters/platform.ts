import type { Platform } from '../models/Platform';
import { z } from '../zod';
import { iso } from './iso';

/** Platform (spec §2). */
export const platformSchema = z.object({
  id: z.string().uuid(),
  name: z.string(),
  slug: z.string(),
  is_oauth: z.boolean(),
  enabled: z.boolean(),
  two_factor_supported: z.boolean(),
  two_factor_required: z.boolean(),
  created_at: z.string(),
  updated_at: z.string(),
});

/** The answer to enabling or disabling sign-in through a platform. */
export const platformSwitchSchema = z.object({
  id: z.string().uuid(),
  name: z.string(),
  slug: z.string(),
  enabled: z.boolean(),
});

/** A platform as the public lists and lookups show it. */
export function presentPlatform(p: Platform): z.infer<typeof platformSchema> {
  return {
    id: p.id,
    name: p.name,
    slug: p.slug,
    is_oauth: p.is_oauth,
    enabled: p.enabled,
    two_factor_supported: p.two_factor_supported,
    two_factor_required: p.two_factor_required,
    created_at: iso(p.created_at),
    updated_at: iso(p.updated_at),
  };
}

/** A platform after its sign-in was switched on or off. */
export function presentPlatformSwitch(p: Platform): z.infer<typeof platformSwitchSchema> {
  return { id: p.id, name: p.name, slug: p.slug, enabled: p.enabled };
}
