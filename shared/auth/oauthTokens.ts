import { buildUserCredentialEntry, CredentialSource } from './credentials';
import { PermissionSet } from '../policies';

/** Prefixes make the kind of a token visible and let the resolver pick its source without a query. */
export const OAUTH_ACCESS_TOKEN_PREFIX = 'oat_';
export const OAUTH_REFRESH_TOKEN_PREFIX = 'ort_';
export const OAUTH_CODE_PREFIX = 'oac_';
export const OAUTH_CLIENT_SECRET_PREFIX = 'ocs_';

/** Lifetimes of the provider's artefacts. Codes are single use and live one minute at most. */
export const OAUTH_CODE_TTL_SECONDS = 60;
export const OAUTH_ACCESS_TOKEN_TTL_SECONDS = 3600;
export const OAUTH_REFRESH_TOKEN_TTL_SECONDS = 30 * 24 * 3600;

/**
 * OAuth access tokens as Bearer credentials: a user principal (via 'oauth') whose permissions are
 * the user's own narrowed to the granted scopes, and further to what the client may still ask for
 * (an admin narrowing a client's allowed_scopes narrows its live tokens too).
 */
export const oauthAccessTokenSource: CredentialSource = {
  name: 'oauthAccessToken',
  matches: (t) => t.startsWith(OAUTH_ACCESS_TOKEN_PREFIX),
  async load(db, hash) {
    const row = await db('oauth_access_tokens as t')
      .join('oauth_clients as c', 'c.id', 't.client_id')
      .join('users as u', 'u.id', 't.user_id')
      .where('t.token_hash', hash)
      .whereNull('t.revoked_at')
      .where('c.is_active', true)
      .whereNull('u.deleted_at')
      .first('t.user_id', 't.client_id', 't.scopes', 't.expires_at', 'c.allowed_scopes');
    if (!row) return null;
    const scopes = new PermissionSet(row.allowed_scopes as string[]).narrow(row.scopes as string[]).list();
    return buildUserCredentialEntry(db, row.user_id, {
      sessionId: null,
      via: 'oauth',
      oauthClientId: row.client_id,
      scopes,
      expiresAt: new Date(row.expires_at).getTime(),
    });
  },
};
