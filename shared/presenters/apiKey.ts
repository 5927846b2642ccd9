import type { ApiKey } from '../models/ApiKey';
import { z } from '../zod';
import { iso } from './iso';

/** API key (spec §2) without any key material: only the truncated prefix is ever shown again. */
export const apiKeySchema = z.object({
  id: z.string().uuid(),
  user_id: z.string().uuid().nullable(),
  key_prefix: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  scopes: z.array(z.string()),
  is_active: z.boolean(),
  is_system: z.boolean(),
  expires_at: z.string().nullable(),
  last_used_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});

/** The create/regenerate answer: the only time the full key is shown. */
export const issuedApiKeySchema = z.object({
  id: z.string().uuid(),
  key: z.string().describe('the full key; shown only in this response'),
  key_prefix: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  scopes: z.array(z.string()),
  is_active: z.boolean(),
  expires_at: z.string().nullable(),
  created_at: z.string(),
});

/** An API key as every listing and read shows it. */
export function presentApiKey(k: ApiKey): z.infer<typeof apiKeySchema> {
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

/** A freshly issued key with its full value (create, regenerate). */
export function presentIssuedApiKey(k: ApiKey, key: string): z.infer<typeof issuedApiKeySchema> {
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
