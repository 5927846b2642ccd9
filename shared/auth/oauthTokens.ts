import type { Knex } from 'knex';
import type { AccessSets } from '../caches/accessSets';
import { buildUserCredentialEntry, CredentialEntry, CredentialSource } from './credentialSources';
import { narrowGrant, PermissionSet } from '../policies';

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
 * The credential entry of a live OAuth access token, by hash (a presented token) or by row id (a
 * WebSocket ticket minted from one, re-checked after an invalidation): a user principal (via
 * 'oauth') whose grant is the granted scopes narrowed to what the client may still ask for (an admin
 * narrowing a client's allowed_scopes narrows its live tokens too). Null once the token is revoked or
 * expired, the client deactivated or deleted, or the user deleted.
 */
export async function loadOAuthTokenEntry(
  db: Knex,
  by: { hash: string } | { id: string },
  access?: AccessSets,
): Promise<CredentialEntry | null> {
  const q = db('oauth_access_tokens as t')
    .join('oauth_clients as c', 'c.id', 't.client_id')
    .join('users as u', 'u.id', 't.user_id')
    .whereNull('t.revoked_at')
    .where('c.is_active', true)
    .whereNull('u.deleted_at');
  if ('hash' in by) q.where('t.token_hash', by.hash);
  else q.where('t.id', by.id).where('t.expires_at', '>', db.fn.now());
  const row = await q.first('t.id', 't.user_id', 't.client_id', 't.scopes', 't.expires_at', 'c.allowed_scopes');
  if (!row) return null;
  const scopes = narrowGrant(new PermissionSet(row.allowed_scopes as string[]), row.scopes as string[]).list();
  return buildUserCredentialEntry(
    db,
    row.user_id,
    {
      sessionId: null,
      via: 'oauth',
      oauthClientId: row.client_id,
      oauthTokenId: row.id,
      scopes,
      expiresAt: new Date(row.expires_at).getTime(),
    },
    access,
  );
}

/** OAuth access tokens as Bearer credentials (see loadOAuthTokenEntry). */
export const oauthAccessTokenSource: CredentialSource = {
  name: 'oauthAccessToken',
  matches: (t) => t.startsWith(OAUTH_ACCESS_TOKEN_PREFIX),
  load: (db, hash, access) => loadOAuthTokenEntry(db, { hash }, access),
};
