import type { OAuthClient } from '../models/OAuthClient';
import type { ConsentWithClient } from '../queries/oauth';
import { z } from '../zod';
import { iso } from './iso';

/** OAuth client (spec §2); the secret hash never leaves the database. */
export const oauthClientSchema = z.object({
  id: z.string().uuid(),
  user_id: z.string().uuid().nullable(),
  name: z.string(),
  description: z.string().nullable(),
  logo_url: z.string().nullable(),
  homepage_url: z.string().nullable(),
  privacy_policy_url: z.string().nullable(),
  terms_of_service_url: z.string().nullable(),
  redirect_uris: z.array(z.string()),
  allowed_scopes: z.array(z.string()),
  client_type: z.enum(['public', 'confidential']),
  is_active: z.boolean(),
  is_first_party: z.boolean(),
  created_at: z.string(),
  updated_at: z.string(),
});

/** The registration answer: the client in short and its secret, shown only here (null for public clients). */
export const registeredOAuthClientSchema = z.object({
  client: z.object({ id: z.string().uuid(), name: z.string(), client_type: z.string(), is_active: z.boolean() }),
  client_secret: z.string().nullable(),
});

/** A regenerated client secret, shown only here. */
export const oauthClientSecretSchema = z.object({
  client_id: z.string().uuid(),
  client_secret: z.string(),
  message: z.string(),
});

/** A consent as its user sees it: which app holds which scopes since when. */
export const consentSchema = z.object({
  id: z.string().uuid(),
  client_id: z.string().uuid(),
  client_name: z.string(),
  client_description: z.string().nullable(),
  logo_url: z.string().nullable(),
  homepage_url: z.string().nullable(),
  is_first_party: z.boolean(),
  scopes: z.array(z.string()),
  granted_at: z.string(),
  updated_at: z.string(),
});

/** An OAuth client as its owner and administrators see it. */
export function presentOAuthClient(c: OAuthClient): z.infer<typeof oauthClientSchema> {
  return {
    id: c.id,
    user_id: c.user_id,
    name: c.name,
    description: c.description,
    logo_url: c.logo_url,
    homepage_url: c.homepage_url,
    privacy_policy_url: c.privacy_policy_url,
    terms_of_service_url: c.terms_of_service_url,
    redirect_uris: c.redirect_uris,
    allowed_scopes: c.allowed_scopes,
    client_type: c.client_type,
    is_active: c.is_active,
    is_first_party: c.is_first_party,
    created_at: iso(c.created_at),
    updated_at: iso(c.updated_at),
  };
}

/** A newly registered client with its secret (null for a public client). */
export function presentRegisteredOAuthClient(
  c: OAuthClient,
  secret: string | null,
): z.infer<typeof registeredOAuthClientSchema> {
  return {
    client: { id: c.id, name: c.name, client_type: c.client_type, is_active: c.is_active },
    client_secret: secret,
  };
}

/** A client's new secret. */
export function presentOAuthClientSecret(c: OAuthClient, secret: string): z.infer<typeof oauthClientSecretSchema> {
  return {
    client_id: c.id,
    client_secret: secret,
    message: 'Store this secret now: it will not be shown again. The previous secret no longer works.',
  };
}

/** A consent with its client. */
export function presentConsent(c: ConsentWithClient): z.infer<typeof consentSchema> {
  return {
    id: c.id,
    client_id: c.client_id,
    client_name: c.client.name,
    client_description: c.client.description,
    logo_url: c.client.logo_url,
    homepage_url: c.client.homepage_url,
    is_first_party: c.client.is_first_party,
    scopes: c.scopes,
    granted_at: iso(c.granted_at),
    updated_at: iso(c.updated_at),
  };
}
