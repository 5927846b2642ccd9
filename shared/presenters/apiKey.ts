import type { ApiKey } from '../models/ApiKey';
import { iso } from './iso';

/** API key (spec §2) without any key material: only the truncated prefix is ever shown again. */
export function presentApiKey(k: ApiKey) {
  return {
    id: k.id,
    user_id: k.user_id,
    key_prefix: k.key_prefix,
    name: k.name,
    description: k.description,
    scopes: k.scopes,
    is_active: k.is_active,
    is_system: k.is_system,
    expires_at: iso(k.expires_at),
    last_used_at: iso(k.last_used_at),
    created_at: iso(k.created_at),
    updated_at: iso(k.updated_at),
  };
}

/** The create/regenerate answer: the only time the full key is shown. */
export function presentIssuedApiKey(k: ApiKey, key: string) {
  return {
    id: k.id,
    key,
    key_prefix: k.key_prefix,
    name: k.name,
    description: k.description,
    scopes: k.scopes,
    is_active: k.is_active,
    expires_at: iso(k.expires_at),
    created_at: iso(k.created_at),
  };
}
