import { createHash, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import {
  OAUTH_ACCESS_TOKEN_PREFIX,
  OAUTH_ACCESS_TOKEN_TTL_SECONDS,
  OAUTH_CODE_PREFIX,
  OAUTH_CODE_TTL_SECONDS,
  OAUTH_REFRESH_TOKEN_PREFIX,
  OAUTH_REFRESH_TOKEN_TTL_SECONDS,
} from '../auth/oauthTokens';
import { randomToken, safeEqual, sha256 } from '../crypto';
import { HttpError } from '../errors';
import type { AuthInvalidation } from '../events';
import { OAuthClient } from '../models/OAuthClient';
import { PermissionSet } from '../policies';
import { findActiveBan } from '../queries/access';
import { recordAuditEvent } from '../audit';
import { isUuid } from '../zod';

/**
 * The OAuth 2.0 provider (decisions.md): authorization codes with PKCE S256 handed out through the
 * ID app's server-side handoff, the token endpoint's code and refresh grants with rotation and
 * reuse detection, and consent revocation. Codes and tokens are stored as SHA-256 hashes.
 */

/** RFC 6749 §5.2 error: the `error` field carries the OAuth error code, `message` the reason. */
export function oauthError(status: 400 | 401, code: string, message: string): HttpError {
  return new HttpError(status, code, message, { error_description: message });
}

/** Why a redirect URI is not acceptable, or null: absolute https, or http on localhost only. */
export function redirectUriProblem(uri: string): string | null {
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return 'must be an absolute URL';
  }
  if (uri.includes('#')) return 'must not contain a fragment';
  if (u.username || u.password) return 'must not contain credentials';
  if (u.protocol === 'https:' && u.hostname) return null;
  if (u.protocol === 'http:' && (u.hostname === 'localhost' || u.hostname === '127.0.0.1')) return null;
  return 'must use https (http only on localhost or 127.0.0.1)';
}

/** `scope` parameter → distinct scopes (space separated, RFC 6749 §3.3). */
export function parseScopeParam(scope: string | undefined): string[] | null {
  if (scope === undefined) return null;
  return [...new Set(scope.split(/\s+/).filter(Boolean))];
}

export interface AuthorizeInput {
  userId: string;
  appId: string;
  clientId: string;
  redirectUri: string;
  scopes: string[] | null;
  state?: string;
  codeChallenge: string;
  ip?: string | null;
  userAgent?: string | null;
}

/**
 * The authorize handoff for a user the ID app vouched for: checks the client, redirect URI and
 * scopes, records the consent (consent_granted) and returns where to send the browser, with a
 * short-lived single-use code and the state.
 */
export async function authorizeClient(db: Knex, input: AuthorizeInput): Promise<{ redirectTo: string; scopes: string[] }> {
  const user = await db('users').where('id', input.userId).whereNull('deleted_at').first('id');
  if (!user) throw new HttpError(401, 'Unauthorized', 'the asserted user does not exist');
  if (await findActiveBan(db, input.userId)) throw new HttpError(403, 'Forbidden', 'account is banned');
  const client = await OAuthClient.query(db).findById(input.clientId);
  if (!client || !client.is_active) throw oauthError(400, 'invalid_client', 'client_id: unknown or inactive client');
  if (!client.redirect_uris.includes(input.redirectUri)) throw oauthError(400, 'invalid_request', 'redirect_uri: not registered for this client');
  const allowed = new PermissionSet(client.allowed_scopes);
  const scopes = input.scopes ?? client.allowed_scopes;
  const refused = scopes.filter((s) => !allowed.has(s));
  if (refused.length) throw oauthError(400, 'invalid_scope', `scope: not allowed for this client: ${refused.join(' ')}`);

  const code = randomToken(OAUTH_CODE_PREFIX, 32);
  await db.transaction(async (trx) => {
    await trx('oauth_consents').insert({ user_id: input.userId, client_id: client.id, scopes: JSON.stringify(scopes) }).onConflict(['user_id', 'client_id']).ignore();
    const consent = await trx('oauth_consents').where({ user_id: input.userId, client_id: client.id }).forUpdate().first();
    const merged = consent.revoked_at ? scopes : [...new Set([...(consent.scopes as string[]), ...scopes])].sort();
    await trx('oauth_consents')
      .where('id', consent.id)
      .update({ scopes: JSON.stringify(merged), revoked_at: null, updated_at: trx.fn.now(), ...(consent.revoked_at ? { granted_at: trx.fn.now() } : {}) });
    await trx('oauth_authorization_codes').insert({
      code_hash: sha256(code),
      client_id: client.id,
      user_id: input.userId,
      redirect_uri: input.redirectUri,
      scopes: JSON.stringify(scopes),
      code_challenge: input.codeChallenge,
      code_challenge_method: 'S256',
      expires_at: new Date(Date.now() + OAUTH_CODE_TTL_SECONDS * 1000),
    });
    await recordAuditEvent(
      {
        user_id: input.userId,
        actor_id: input.userId,
        event_type: 'consent_granted',
        resource_type: 'oauth_client',
        resource_id: client.id,
        ip_address: input.ip ?? null,
        user_agent: input.userAgent ?? null,
        metadata: { client_name: client.name, scopes, app_id: input.appId },
      },
      trx,
    );
  });
  const target = new URL(input.redirectUri);
  target.searchParams.set('code', code);
  if (input.state !== undefined) target.searchParams.set('state', input.state);
  return { redirectTo: target.toString(), scopes };
}

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
}

/** Who to tell when tokens are revoked (cached credentials on every instance). */
export type Invalidate = (msg: AuthInvalidation) => Promise<void>;

/** Client authentication at the token endpoint: confidential clients must present their secret. */
export async function authenticateClient(db: Knex, clientId: string | undefined, clientSecret: string | undefined): Promise<OAuthClient> {
  if (!clientId || !isUuid(clientId)) throw oauthError(401, 'invalid_client', 'client authentication failed');
  const client = await OAuthClient.query(db).findById(clientId.toLowerCase());
  if (!client || !client.is_active) throw oauthError(401, 'invalid_client', 'client authentication failed');
  if (client.client_type === 'confidential') {
    // Hash first, so the comparison is constant-time whatever the presented length.
    const ok = !!clientSecret && !!client.client_secret_hash && safeEqual(sha256(clientSecret), client.client_secret_hash);
    if (!ok) throw oauthError(401, 'invalid_client', 'client authentication failed');
  }
  return client;
}

/** RFC 7636 S256: BASE64URL(SHA256(ASCII(code_verifier))). */
export function pkceChallenge(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;

async function issueTokens(
  trx: Knex.Transaction,
  t: { clientId: string; userId: string; scopes: string[]; familyId: string; codeId?: string; parentId?: string },
): Promise<{ response: TokenResponse; refreshId: string }> {
  const access = randomToken(OAUTH_ACCESS_TOKEN_PREFIX, 32);
  const refresh = randomToken(OAUTH_REFRESH_TOKEN_PREFIX, 32);
  const now = Date.now();
  const [r] = await trx('oauth_refresh_tokens')
    .insert({
      token_hash: sha256(refresh),
      client_id: t.clientId,
      user_id: t.userId,
      scopes: JSON.stringify(t.scopes),
      family_id: t.familyId,
      authorization_code_id: t.codeId ?? null,
      parent_id: t.parentId ?? null,
      expires_at: new Date(now + OAUTH_REFRESH_TOKEN_TTL_SECONDS * 1000),
    })
    .returning('id');
  await trx('oauth_access_tokens').insert({
    token_hash: sha256(access),
    client_id: t.clientId,
    user_id: t.userId,
    scopes: JSON.stringify(t.scopes),
    family_id: t.familyId,
    refresh_token_id: r.id,
    expires_at: new Date(now + OAUTH_ACCESS_TOKEN_TTL_SECONDS * 1000),
  });
  return {
    refreshId: r.id,
    response: { access_token: access, token_type: 'Bearer', expires_in: OAUTH_ACCESS_TOKEN_TTL_SECONDS, refresh_token: refresh, scope: t.scopes.join(' ') },
  };
}

/** Revokes every access and refresh token of a family (reuse of a code or a rotated refresh token). */
async function revokeFamily(db: Knex, familyId: string): Promise<void> {
  await db.transaction(async (trx) => {
    await trx('oauth_refresh_tokens').where('family_id', familyId).whereNull('revoked_at').update({ revoked_at: trx.fn.now() });
    await trx('oauth_access_tokens').where('family_id', familyId).whereNull('revoked_at').update({ revoked_at: trx.fn.now() });
  });
}

async function consentActive(db: Knex | Knex.Transaction, userId: string, clientId: string): Promise<boolean> {
  return !!(await db('oauth_consents').where({ user_id: userId, client_id: clientId }).whereNull('revoked_at').first('id'));
}

async function userActive(db: Knex | Knex.Transaction, userId: string): Promise<boolean> {
  return !!(await db('users').where('id', userId).whereNull('deleted_at').first('id'));
}

/**
 * grant_type=authorization_code: the code is claimed atomically (single use) before anything else
 * is checked, so a failed attempt burns it too. Presenting a code a second time revokes the tokens
 * it produced (RFC 6749 §4.1.2).
 */
export async function exchangeAuthorizationCode(
  db: Knex,
  invalidate: Invalidate,
  input: { client: OAuthClient; code?: string; redirectUri?: string; codeVerifier?: string },
): Promise<TokenResponse> {
  if (!input.code) throw oauthError(400, 'invalid_request', 'code: required');
  if (!input.redirectUri) throw oauthError(400, 'invalid_request', 'redirect_uri: required');
  if (!input.codeVerifier || !VERIFIER.test(input.codeVerifier)) throw oauthError(400, 'invalid_request', 'code_verifier: must be 43-128 characters of [A-Za-z0-9-._~]');
  const hash = sha256(input.code);
  const [code] = await db('oauth_authorization_codes').where('code_hash', hash).whereNull('used_at').update({ used_at: db.fn.now() }).returning('*');
  if (!code) {
    const used = await db('oauth_authorization_codes').where('code_hash', hash).first('id', 'user_id', 'client_id');
    if (used && used.client_id === input.client.id) {
      const families: Array<{ family_id: string }> = await db('oauth_refresh_tokens').where('authorization_code_id', used.id).distinct('family_id');
      for (const f of families) await revokeFamily(db, f.family_id);
      if (families.length) await invalidate({ userId: used.user_id });
    }
    throw oauthError(400, 'invalid_grant', 'authorization code is invalid or was already used');
  }
  if (code.client_id !== input.client.id) throw oauthError(400, 'invalid_grant', 'authorization code was issued to another client');
  if (new Date(code.expires_at).getTime() <= Date.now()) throw oauthError(400, 'invalid_grant', 'authorization code expired');
  if (code.redirect_uri !== input.redirectUri) throw oauthError(400, 'invalid_grant', 'redirect_uri does not match the authorization request');
  if (!safeEqual(pkceChallenge(input.codeVerifier), code.code_challenge)) throw oauthError(400, 'invalid_grant', 'code_verifier does not match the code challenge');
  if (!(await userActive(db, code.user_id)) || (await findActiveBan(db, code.user_id))) throw oauthError(400, 'invalid_grant', 'the user of this code can no longer sign in');
  if (!(await consentActive(db, code.user_id, code.client_id))) throw oauthError(400, 'invalid_grant', 'consent was revoked');
  return db.transaction(async (trx) => {
    const { response } = await issueTokens(trx, { clientId: code.client_id, userId: code.user_id, scopes: code.scopes, familyId: randomUUID(), codeId: code.id });
    return response;
  });
}

/**
 * grant_type=refresh_token with rotation: each refresh token works once and is replaced by a new
 * one; presenting a rotated token again means it leaked, so the whole family is revoked.
 * An optional `scope` may narrow (never widen) the grant.
 */
export async function refreshAccessToken(
  db: Knex,
  invalidate: Invalidate,
  input: { client: OAuthClient; refreshToken?: string; scopes: string[] | null },
): Promise<TokenResponse> {
  if (!input.refreshToken) throw oauthError(400, 'invalid_request', 'refresh_token: required');
  const hash = sha256(input.refreshToken);
  const row = await db('oauth_refresh_tokens').where('token_hash', hash).first();
  if (!row || row.client_id !== input.client.id) throw oauthError(400, 'invalid_grant', 'refresh token is invalid');
  if (row.rotated_at || row.revoked_at) {
    if (row.rotated_at) {
      await revokeFamily(db, row.family_id);
      await invalidate({ userId: row.user_id });
      throw oauthError(400, 'invalid_grant', 'refresh token was already used; every token of this grant is revoked');
    }
    throw oauthError(400, 'invalid_grant', 'refresh token was revoked');
  }
  if (new Date(row.expires_at).getTime() <= Date.now()) throw oauthError(400, 'invalid_grant', 'refresh token expired');
  const granted = new PermissionSet(row.scopes as string[]);
  const scopes = input.scopes ?? (row.scopes as string[]);
  const widened = scopes.filter((s) => !granted.has(s));
  if (widened.length) throw oauthError(400, 'invalid_scope', `scope: exceeds the original grant: ${widened.join(' ')}`);
  if (!(await userActive(db, row.user_id)) || (await findActiveBan(db, row.user_id))) throw oauthError(400, 'invalid_grant', 'the user of this grant can no longer sign in');
  if (!(await consentActive(db, row.user_id, row.client_id))) throw oauthError(400, 'invalid_grant', 'consent was revoked');

  const result = await db.transaction(async (trx) => {
    // Claim the token: of two concurrent refreshes exactly one wins; the other is a reuse.
    const claimed = await trx('oauth_refresh_tokens').where('id', row.id).whereNull('rotated_at').whereNull('revoked_at').update({ rotated_at: trx.fn.now() });
    if (!claimed) return null;
    const issued = await issueTokens(trx, { clientId: row.client_id, userId: row.user_id, scopes, familyId: row.family_id, parentId: row.id });
    await trx('oauth_refresh_tokens').where('id', row.id).update({ replaced_by_id: issued.refreshId });
    return issued.response;
  });
  if (!result) {
    await revokeFamily(db, row.family_id);
    await invalidate({ userId: row.user_id });
    throw oauthError(400, 'invalid_grant', 'refresh token was already used; every token of this grant is revoked');
  }
  return result;
}

/**
 * Withdraws a user's consent for a client: revokes its tokens and pending codes for that user and
 * records consent_revoked. Returns false when there was no active consent. The caller invalidates
 * cached credentials and pushes oauthConsentRevoked after this returns (post-commit).
 */
export async function revokeConsent(db: Knex, input: { userId: string; clientId: string; actorId: string | null; ip?: string | null; userAgent?: string | null }): Promise<boolean> {
  return db.transaction(async (trx) => {
    const n = await trx('oauth_consents').where({ user_id: input.userId, client_id: input.clientId }).whereNull('revoked_at').update({ revoked_at: trx.fn.now(), updated_at: trx.fn.now() });
    if (!n) return false;
    const scope = { user_id: input.userId, client_id: input.clientId };
    await trx('oauth_access_tokens').where(scope).whereNull('revoked_at').update({ revoked_at: trx.fn.now() });
    await trx('oauth_refresh_tokens').where(scope).whereNull('revoked_at').update({ revoked_at: trx.fn.now() });
    await trx('oauth_authorization_codes').where(scope).whereNull('used_at').update({ used_at: trx.fn.now() });
    await recordAuditEvent(
      {
        user_id: input.userId,
        actor_id: input.actorId,
        event_type: 'consent_revoked',
        resource_type: 'oauth_client',
        resource_id: input.clientId,
        ip_address: input.ip ?? null,
        user_agent: input.userAgent ?? null,
      },
      trx,
    );
    return true;
  });
}

/**
 * Users holding live tokens of a client: whose cached credentials must go when the client is
 * deleted, deactivated or has its scopes narrowed. Past a few hundred users, drop everything.
 */
export async function clientTokenInvalidation(db: Knex | Knex.Transaction, clientId: string): Promise<AuthInvalidation[]> {
  const rows: Array<{ user_id: string }> = await db('oauth_access_tokens').where('client_id', clientId).whereNull('revoked_at').where('expires_at', '>', db.fn.now()).distinct('user_id').limit(201);
  if (rows.length > 200) return [{ all: true }];
  return rows.map((r) => ({ userId: r.user_id }));
}

/**
 * Scheduled cleanup: codes, access tokens and refresh tokens a day past expiry can never be used
 * again (a presented expired token is refused whether or not its row exists), so they go.
 */
export async function cleanupOAuthArtifacts(db: Knex): Promise<{ codes: number; accessTokens: number; refreshTokens: number }> {
  const cutoff = db.raw("now() - interval '1 day'");
  const codes = await db('oauth_authorization_codes').where('expires_at', '<', cutoff).delete();
  const accessTokens = await db('oauth_access_tokens').where('expires_at', '<', cutoff).delete();
  const refreshTokens = await db('oauth_refresh_tokens').where('expires_at', '<', cutoff).delete();
  return { codes, accessTokens, refreshTokens };
}
