import type { OAuthClient } from '../models/OAuthClient';
import type { OAuthConsent } from '../models/OAuthConsent';
import { iso } from './iso';

/** OAuth client (spec §2); the secret hash never leaves the database. */
export function presentOAuthClient(c: OAuthClient) {
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

/** A consent as its user sees it: which app holds which scopes since when. */
export function presentConsent(c: OAuthConsent & { client: OAuthClient }) {
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
