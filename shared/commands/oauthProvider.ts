import type { Knex } from 'knex';
import { OAUTH_CODE_PREFIX, OAUTH_CODE_TTL_SECONDS } from '../auth/oauthTokens';
import { attributed, Attribution, recordAuditEvent } from '../audit';
import { randomToken, safeEqual, sha256 } from '../crypto';
import { afterCommit, transaction } from '../db';
import { oauthError } from '../domain/oauth';
import { HttpError, notFound } from '../errors';
import { OAuthClient } from '../models/OAuthClient';
import { grantCovers, PermissionSet } from '../policies';
import { findActiveBan } from '../queries/access';
import { userActive } from '../queries/oauth';
import { rowById } from '../rowLoader';
import { isUuid } from '../zod';
import { AccessServices, invalidateCredentials } from './accessChanges';

/**
 * The OAuth 2.0 provider (decisions.md): authorization codes with PKCE S256 handed out through the
 * ID app's server-side handoff, client authentication at the token endpoint, consent revocation
 * and the cleanup of expired artifacts. The grants themselves are in oauthTokenGrants.ts. Codes
 * and tokens are stored as SHA-256 hashes.
 */

export interface AuthorizeInput {
  userId: string;
  appId: string;
  clientId: string;
  redirectUri: string;
  scopes: string[] | null;
  state?: string;
  codeChallenge: string;
}

/**
 * The authorize handoff for a user the ID app vouched for: checks the client, redirect URI and
 * scopes, records the consent (consent_granted, attributed to `by`) and returns where to send the
 * browser, with a short-lived single-use code and the state.
 */
export async function authorizeClient(
  db: Knex,
  input: AuthorizeInput,
  by: Attribution,
): Promise<{ redirectTo: string; scopes: string[] }> {
  if (!(await userActive(db, input.userId)))
    throw new HttpError(401, 'Unauthorized', 'the asserted user does not exist');
  if (await findActiveBan(db, input.userId)) throw new HttpError(403, 'Forbidden', 'account is banned');
  const client = await rowById(OAuthClient).load(input.clientId);
  if (!client || !client.is_active) throw oauthError(400, 'invalid_client', 'client_id: unknown or inactive client');
  if (!client.redirect_uris.includes(input.redirectUri))
    throw oauthError(400, 'invalid_request', 'redirect_uri: not registered for this client');
  const allowed = new PermissionSet(client.allowed_scopes);
  const scopes = input.scopes ?? client.allowed_scopes;
  // A client allowed `*:*` may not ask for account scopes it does not name (policies: grantCovers).
  const refused = scopes.filter((s) => !grantCovers(allowed, s));
  if (refused.length)
    throw oauthError(400, 'invalid_scope', `scope: not allowed for this client: ${refused.join(' ')}`);

  const code = randomToken(OAUTH_CODE_PREFIX, 32);
  await transaction(db, async (trx) => {
    const key = { user_id: input.userId, client_id: client.id };
    await trx('oauth_consents')
      .insert({ ...key, scopes: JSON.stringify(scopes) })
      .onConflict(['user_id', 'client_id'])
      .ignore();
    const consent = await trx('oauth_consents').where(key).forUpdate().first();
    const merged = consent.revoked_at ? scopes : [...new Set([...(consent.scopes as string[]), ...scopes])].sort();
    await trx('oauth_consents')
      .where('id', consent.id)
      .update({
        scopes: JSON.stringify(merged),
        revoked_at: null,
        updated_at: trx.fn.now(),
        ...(consent.revoked_at ? { granted_at: trx.fn.now() } : {}),
      });
    await trx('oauth_authorization_codes').insert({
      // The grant this code belongs to, compared exactly at the exchange (lockActiveConsent); read
      // in SQL, as a JavaScript Date would drop its microseconds.
      consent_granted_at: trx.raw('(SELECT granted_at FROM oauth_consents WHERE id = ?)', [consent.id]),
      code_hash: sha256(code),
      client_id: client.id,
      user_id: input.userId,
      redirect_uri: input.redirectUri,
      scopes: JSON.stringify(scopes),
      code_challenge: input.codeChallenge,
      code_challenge_method: 'S256',
      expires_at: new Date(Date.now() + OAUTH_CODE_TTL_SECONDS * 1000),
    });
    const metadata = { client_name: client.name, scopes, app_id: input.appId };
    await recordAuditEvent(
      attributed(by, {
        user_id: input.userId,
        event_type: 'consent_granted',
        resource_type: 'oauth_client',
        resource_id: client.id,
        metadata,
      }),
      trx,
    );
  });
  const target = new URL(input.redirectUri);
  target.searchParams.set('code', code);
  if (input.state !== undefined) target.searchParams.set('state', input.state);
  return { redirectTo: target.toString(), scopes };
}

/** Client authentication at the token endpoint: confidential clients must present their secret. */
export async function authenticateClient(
  clientId: string | undefined,
  clientSecret: string | undefined,
): Promise<OAuthClient> {
  if (!clientId || !isUuid(clientId)) throw oauthError(401, 'invalid_client', 'client authentication failed');
  const client = await rowById(OAuthClient).load(clientId);
  if (!client || !client.is_active) throw oauthError(401, 'invalid_client', 'client authentication failed');
  if (client.client_type === 'confidential') {
    // Hash first, so the comparison is constant-time whatever the presented length.
    const ok =
      !!clientSecret && !!client.client_secret_hash && safeEqual(sha256(clientSecret), client.client_secret_hash);
    if (!ok) throw oauthError(401, 'invalid_client', 'client authentication failed');
  }
  return client;
}

/**
 * Revokes a user's OAuth grants inside `trx` (with `client_id`, those of that client only): pending
 * authorization codes are burnt and access and refresh tokens revoked; with `consents`, the
 * consents are revoked too (the user is asked again), else they are only locked, so that the grants
 * in flight finish first. The caller drops the user's cached credentials after the commit
 * (invalidateCredentials). Used by consent revocation, account deletion and password reset.
 */
export async function revokeOAuthGrants(
  trx: Knex.Transaction,
  scope: { user_id: string; client_id?: string },
  opts: { consents: boolean },
): Promise<{ consents: number; accessTokens: number; refreshTokens: number }> {
  // Pending codes first: an exchange that claimed one holds its row, then waits for the consent
  // row (lockActiveConsent). Taking the codes before the consent lets that exchange commit
  // (the code is then used, not matched here) instead of deadlocking with it.
  await trx('oauth_authorization_codes').where(scope).whereNull('used_at').update({ used_at: trx.fn.now() });
  // The consent rows next: a grant that locked one (FOR SHARE) has committed its tokens by the time
  // this returns, so the UPDATEs below, each a new snapshot, reach them; a grant that comes later
  // waits for this commit and finds its code or refresh token revoked.
  const consents = opts.consents
    ? await trx('oauth_consents')
        .where(scope)
        .whereNull('revoked_at')
        .update({ revoked_at: trx.fn.now(), updated_at: trx.fn.now() })
    : (await trx('oauth_consents').where(scope).whereNull('revoked_at').forUpdate().select('id')).length;
  const accessTokens = await trx('oauth_access_tokens')
    .where(scope)
    .whereNull('revoked_at')
    .update({ revoked_at: trx.fn.now() });
  const refreshTokens = await trx('oauth_refresh_tokens')
    .where(scope)
    .whereNull('revoked_at')
    .update({ revoked_at: trx.fn.now() });
  // Codes again: an authorize that held the consent row when the first pass ran has committed its
  // code by now. Codes an exchange holds are skipped: it waits for the consent and finds it revoked.
  await trx('oauth_authorization_codes')
    .whereIn(
      'id',
      trx('oauth_authorization_codes').where(scope).whereNull('used_at').forUpdate().skipLocked().select('id'),
    )
    .update({ used_at: trx.fn.now() });
  return { consents, accessTokens, refreshTokens };
}

/**
 * Withdraws a user's consent for a client: revokes its tokens and pending codes for that user and
 * records consent_revoked; 404 when there was no active consent. After the commit the user's
 * cached credentials are dropped and their clients get oauthConsentRevoked.
 */
export async function revokeConsent(
  services: AccessServices,
  input: { userId: string; clientId: string },
  by: Attribution,
): Promise<void> {
  const { userId, clientId } = input;
  await transaction(services.db, async (trx) => {
    const revoked = await revokeOAuthGrants(trx, { user_id: userId, client_id: clientId }, { consents: true });
    // Nothing was standing: the statements above are rolled back with the 404.
    if (!revoked.consents) throw notFound('consent');
    await recordAuditEvent(
      attributed(by, {
        user_id: userId,
        event_type: 'consent_revoked',
        resource_type: 'oauth_client',
        resource_id: clientId,
      }),
      trx,
    );
    afterCommit(trx, () => invalidateCredentials(services, { userIds: [userId] }));
    afterCommit(trx, async () => {
      try {
        await services.bus.publishToUser(userId, {
          type: 'oauthConsentRevoked',
          userId,
          clientId,
          timestamp: new Date().toISOString(),
        });
      } catch (err) {
        services.logger.warn({ err: (err as Error).message }, 'could not publish oauthConsentRevoked');
      }
    });
  });
}

/**
 * Scheduled cleanup: codes, access tokens and refresh tokens a day past expiry can never be used
 * again (a presented expired token is refused whether or not its row exists), so they go.
 */
export async function cleanupOAuthArtifacts(
  db: Knex,
): Promise<{ codes: number; accessTokens: number; refreshTokens: number }> {
  const cutoff = db.raw("now() - interval '24 hours'");
  const codes = await db('oauth_authorization_codes').where('expires_at', '<', cutoff).delete();
  const accessTokens = await db('oauth_access_tokens').where('expires_at', '<', cutoff).delete();
  const refreshTokens = await db('oauth_refresh_tokens').where('expires_at', '<', cutoff).delete();
  return { codes, accessTokens, refreshTokens };
}
