import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import {
  OAUTH_ACCESS_TOKEN_PREFIX,
  OAUTH_ACCESS_TOKEN_TTL_SECONDS,
  OAUTH_REFRESH_TOKEN_PREFIX,
  OAUTH_REFRESH_TOKEN_TTL_SECONDS,
} from '../auth/oauthTokens';
import { HttpError } from '../errors';
import { randomToken, safeEqual, sha256 } from '../crypto';
import { afterCommit, transaction } from '../db';
import { oauthError, pkceChallenge, PKCE_VERIFIER, TokenResponse } from '../domain/oauth';
import type { OAuthClient } from '../models/OAuthClient';
import { grantCovers, grantStillAllowed, PermissionSet } from '../policies';
import { findActiveBan } from '../queries/access';
import { lockActiveConsent, lockClientForGrant, userActive } from '../queries/oauth';
import { AccessServices, invalidateCredentials } from './accessChanges';

/**
 * The token endpoint's grants (decisions.md): authorization_code with PKCE S256 and refresh_token
 * with rotation and reuse detection. Tokens are stored as SHA-256 hashes.
 */

async function issueTokens(
  trx: Knex.Transaction,
  t: {
    clientId: string;
    userId: string;
    /** What the user granted: kept by the refresh token. */
    grant: string[];
    /** What the access token holds and the answer names: the grant as far as the client may still ask for it. */
    scopes: string[];
    familyId: string;
    codeId?: string;
    parentId?: string;
  },
): Promise<{ response: TokenResponse; refreshId: string }> {
  const access = randomToken(OAUTH_ACCESS_TOKEN_PREFIX, 32);
  const refresh = randomToken(OAUTH_REFRESH_TOKEN_PREFIX, 32);
  const now = Date.now();
  const [r] = await trx('oauth_refresh_tokens')
    .insert({
      token_hash: sha256(refresh),
      client_id: t.clientId,
      user_id: t.userId,
      scopes: JSON.stringify(t.grant),
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
    response: {
      access_token: access,
      token_type: 'Bearer',
      expires_in: OAUTH_ACCESS_TOKEN_TTL_SECONDS,
      refresh_token: refresh,
      scope: t.scopes.join(' '),
    },
  };
}

/**
 * Revokes every access and refresh token of the families (reuse of a code or of a rotated refresh
 * token); the user's cached credentials are dropped after the commit.
 */
async function revokeFamilies(services: AccessServices, familyIds: string[], userId: string): Promise<void> {
  if (!familyIds.length) return;
  await transaction(services.db, async (trx) => {
    await trx('oauth_refresh_tokens')
      .whereIn('family_id', familyIds)
      .whereNull('revoked_at')
      .update({ revoked_at: trx.fn.now() });
    await trx('oauth_access_tokens')
      .whereIn('family_id', familyIds)
      .whereNull('revoked_at')
      .update({ revoked_at: trx.fn.now() });
    afterCommit(trx, () => invalidateCredentials(services, { userIds: [userId] }));
  });
}

/** Whether the user may still sign in: not deleted, not banned. */
async function userMaySignIn(db: Knex, userId: string): Promise<boolean> {
  return (await userActive(db, userId)) && !(await findActiveBan(db, userId));
}

/**
 * grant_type=authorization_code: the code is claimed atomically (single use) before anything else
 * is checked, so a failed attempt burns it too. Presenting a code a second time revokes the tokens
 * it produced (RFC 6749 §4.1.2).
 */
export async function exchangeAuthorizationCode(
  services: AccessServices,
  input: { client: OAuthClient; code?: string; redirectUri?: string; codeVerifier?: string },
): Promise<TokenResponse> {
  const db = services.db;
  if (!input.code) throw oauthError(400, 'invalid_request', 'code: required');
  if (!input.redirectUri) throw oauthError(400, 'invalid_request', 'redirect_uri: required');
  if (!input.codeVerifier || !PKCE_VERIFIER.test(input.codeVerifier)) {
    throw oauthError(400, 'invalid_request', 'code_verifier: must be 43-128 characters of [A-Za-z0-9-._~]');
  }
  const hash = sha256(input.code);
  const verifier = input.codeVerifier;
  const redirectUri = input.redirectUri;
  // The claim and the tokens it gives commit together: a concurrent second presentation waits on
  // the claimed row until the tokens exist, then finds them and revokes them (reuse, below). A
  // refused claim still commits (the code is burnt), and the refusal is thrown after the commit.
  const outcome = await transaction(db, async (trx): Promise<TokenResponse | HttpError | undefined> => {
    const allowed = await lockClientForGrant(trx, input.client.id);
    if (!allowed) return oauthError(401, 'invalid_client', 'unknown client');
    const [code] = await trx('oauth_authorization_codes')
      .where('code_hash', hash)
      .whereNull('used_at')
      .update({ used_at: trx.fn.now() })
      .returning('*');
    if (!code) return undefined;
    if (code.client_id !== input.client.id)
      return oauthError(400, 'invalid_grant', 'authorization code was issued to another client');
    if (new Date(code.expires_at).getTime() <= Date.now())
      return oauthError(400, 'invalid_grant', 'authorization code expired');
    if (code.redirect_uri !== redirectUri)
      return oauthError(400, 'invalid_grant', 'redirect_uri does not match the authorization request');
    if (!safeEqual(pkceChallenge(verifier), code.code_challenge))
      return oauthError(400, 'invalid_grant', 'code_verifier does not match the code challenge');
    if (!(await userMaySignIn(trx, code.user_id)))
      return oauthError(400, 'invalid_grant', 'the user of this code can no longer sign in');
    if (!(await lockActiveConsent(trx, code.user_id, code.client_id, code.id)))
      return oauthError(400, 'invalid_grant', 'consent was revoked');
    const { response } = await issueTokens(trx, {
      clientId: code.client_id,
      userId: code.user_id,
      grant: code.scopes,
      // Allowed when the code was issued; the client may have been narrowed since.
      scopes: grantStillAllowed(allowed, code.scopes),
      familyId: randomUUID(),
      codeId: code.id,
    });
    return response;
  });
  if (outcome instanceof HttpError) throw outcome;
  if (outcome) return outcome;
  const used = await db('oauth_authorization_codes').where('code_hash', hash).first('id', 'user_id', 'client_id');
  if (used && used.client_id === input.client.id) {
    const families: Array<{ family_id: string }> = await db('oauth_refresh_tokens')
      .where('authorization_code_id', used.id)
      .distinct('family_id');
    await revokeFamilies(
      services,
      families.map((f) => f.family_id),
      used.user_id,
    );
  }
  throw oauthError(400, 'invalid_grant', 'authorization code is invalid or was already used');
}

/**
 * grant_type=refresh_token with rotation: each refresh token works once and is replaced by a new
 * one; presenting a rotated token again means it leaked, so the whole family is revoked.
 * An optional `scope` may narrow (never widen) the grant; the new tokens are also narrowed to what
 * the client may still ask for.
 */
export async function refreshAccessToken(
  services: AccessServices,
  input: { client: OAuthClient; refreshToken?: string; scopes: string[] | null },
): Promise<TokenResponse> {
  const db = services.db;
  const reused = () =>
    oauthError(400, 'invalid_grant', 'refresh token was already used; every token of this grant is revoked');
  if (!input.refreshToken) throw oauthError(400, 'invalid_request', 'refresh_token: required');
  const row = await db('oauth_refresh_tokens').where('token_hash', sha256(input.refreshToken)).first();
  if (!row || row.client_id !== input.client.id) throw oauthError(400, 'invalid_grant', 'refresh token is invalid');
  if (row.rotated_at) {
    await revokeFamilies(services, [row.family_id], row.user_id);
    throw reused();
  }
  if (row.revoked_at) throw oauthError(400, 'invalid_grant', 'refresh token was revoked');
  if (new Date(row.expires_at).getTime() <= Date.now()) throw oauthError(400, 'invalid_grant', 'refresh token expired');
  const granted = new PermissionSet(row.scopes as string[]);
  const scopes = input.scopes ?? (row.scopes as string[]);
  // An account scope must be named by the grant: a `*:*` consent never widens into one (policies).
  const widened = scopes.filter((s) => !grantCovers(granted, s));
  if (widened.length) throw oauthError(400, 'invalid_scope', `scope: exceeds the original grant: ${widened.join(' ')}`);
  if (!(await userMaySignIn(db, row.user_id)))
    throw oauthError(400, 'invalid_grant', 'the user of this grant can no longer sign in');

  const result = await transaction(db, async (trx): Promise<TokenResponse | HttpError | null> => {
    const allowed = await lockClientForGrant(trx, row.client_id);
    if (!allowed) return oauthError(401, 'invalid_client', 'unknown client');
    // Inside the transaction that issues the tokens, locked: see lockActiveConsent.
    if (!(await lockActiveConsent(trx, row.user_id, row.client_id)))
      return oauthError(400, 'invalid_grant', 'consent was revoked');
    // Claim the token: of two concurrent refreshes exactly one wins; the other is a reuse.
    const claimed = await trx('oauth_refresh_tokens')
      .where('id', row.id)
      .whereNull('rotated_at')
      .whereNull('revoked_at')
      .update({ rotated_at: trx.fn.now() });
    if (!claimed) return null;
    const issued = await issueTokens(trx, {
      clientId: row.client_id,
      userId: row.user_id,
      // The refresh token keeps the grant; the access token holds what the client may still ask
      // for, which the answered `scope` describes (RFC 6749 §5.1).
      grant: scopes,
      scopes: grantStillAllowed(allowed, scopes),
      familyId: row.family_id,
      parentId: row.id,
    });
    await trx('oauth_refresh_tokens').where('id', row.id).update({ replaced_by_id: issued.refreshId });
    return issued.response;
  });
  if (result instanceof HttpError) throw result;
  if (!result) {
    await revokeFamilies(services, [row.family_id], row.user_id);
    throw reused();
  }
  return result;
}
