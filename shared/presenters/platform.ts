import type { Platform } from '../models/Platform';
import { iso } from './iso';

/** Platform (spec §2). */
export function presentPlatform(p: Platform) {
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
