import Router from '@koa/router';
import { ASSERTION_HEADER, verifyAppAssertion } from '../../shared/auth/assertionVerifier';
import { authenticateClient, authorizeClient, revokeConsent } from '../../shared/commands/oauthProvider';
import { exchangeAuthorizationCode, refreshAccessToken } from '../../shared/commands/oauthTokenGrants';
import { basicClientCredentials, oauthError, parseScopeParam, TokenResponse } from '../../shared/domain/oauth';
import { HttpError, serviceUnavailable, unauthorized } from '../../shared/errors';
import type { OAuthClient } from '../../shared/models/OAuthClient';
import { ACCOUNT_SCOPES, actingUserId, authorize, subjects } from '../../shared/policies';
import { consentSchema, presentConsent } from '../../shared/presenters/oauthClient';
import { activeConsents } from '../../shared/queries/oauth';
import { z, zChars, zUuid } from '../../shared/zod';
import { AppContext, AppState, defineRoute, requestAttribution } from '../routing';
import type { ApiServices } from '../services';
import { listSchema, noContent, resource } from '../responses';

const authorizeParams = z.object({
  client_id: zUuid(),
  redirect_uri: zChars({ min: 1, max: 2000 }),
  response_type: z.literal('code', { errorMap: () => ({ message: 'must be code' }) }),
  scope: zChars({ max: 4000 }).optional(),
  state: zChars({ max: 2000 }).optional(),
  code_challenge: z
    .string()
    .regex(/^[A-Za-z0-9_-]{43}$/, 'must be the unpadded base64url SHA-256 of the code verifier (43 characters)'),
  code_challenge_method: z.literal('S256', { errorMap: () => ({ message: 'must be S256' }) }),
});
type AuthorizeParams = z.infer<typeof authorizeParams>;

/** A token request parameter: text, sent once (a form field sent twice arrives as an array). */
const param = (max: number, min = 0, minMessage?: string) =>
  zChars(
    { max, min, minMessage },
    z.string({
      errorMap: (issue, ctx) => ({
        message:
          issue.code === 'invalid_type' && issue.received === 'array' ? 'given more than once' : ctx.defaultError,
      }),
    }),
  );

const tokenBody = z.object({
  // Sent without a value is not sent (RFC 6749 §3.2).
  grant_type: param(100, 1, 'Required'),
  client_id: param(100).optional(),
  client_secret: param(512).optional(),
  code: param(512).optional(),
  redirect_uri: param(2000).optional(),
  code_verifier: param(256).optional(),
  refresh_token: param(512).optional(),
  scope: param(4000).optional(),
});

type TokenBody = z.infer<typeof tokenBody>;

const tokenResponse = z.object({
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int(),
  refresh_token: z.string(),
  scope: z.string(),
});

/**
 * The credentials the client presents: HTTP Basic (RFC 6749 §2.3.1, the header the auth middleware
 * left to this route), or client_id and client_secret in the body. One method per request: a
 * client_secret beside the header, or a client_id naming another client, is invalid_request; the
 * same client_id beside it is accepted (some clients always send it), and so are empty ones (sent
 * without a value is not sent, RFC 6749 §3.2).
 */
function clientCredentials(ctx: AppContext, body: TokenBody): { clientId?: string; clientSecret?: string } {
  const header = ctx.state.clientAuthorization;
  if (header === undefined) return { clientId: body.client_id, clientSecret: body.client_secret };
  if (body.client_secret)
    throw oauthError(
      400,
      'invalid_request',
      'client credentials both in the Authorization header and in the body (client_secret): use one method',
    );
  const basic = basicClientCredentials(header);
  if (!basic)
    throw oauthError(
      401,
      'invalid_client',
      'Authorization: expected Basic with the client_id and client_secret, each form-urlencoded (RFC 6749 §2.3.1)',
    );
  if (body.client_id && body.client_id !== basic.clientId)
    throw oauthError(400, 'invalid_request', 'client_id: not the client of the Authorization header');
  return basic;
}

/** Verifies X-ID-App-Assertion (spec §5.8) and returns the user it vouches for. */
async function assertedUser(ctx: AppContext): Promise<{ userId: string; appId: string }> {
  const result = await verifyAppAssertion(ctx.services.config, ctx.services.redis, ctx.get(ASSERTION_HEADER) || null);
  if (!result.ok) {
    if (result.reason === 'unavailable') throw serviceUnavailable(result.message);
    throw unauthorized(`invalid X-ID-App-Assertion: ${result.message}`);
  }
  return { userId: result.subject, appId: result.appId };
}

async function handleAuthorize(ctx: AppContext, params: AuthorizeParams): Promise<void> {
  const { userId, appId } = await assertedUser(ctx);
  const input = {
    userId,
    appId,
    clientId: params.client_id,
    redirectUri: params.redirect_uri,
    scopes: parseScopeParam(params.scope),
    state: params.state,
    codeChallenge: params.code_challenge,
  };
  // The asserted user grants the consent, whoever relays the handoff.
  const { redirectTo } = await authorizeClient(ctx.services.db, input, { ...requestAttribution(ctx), actorId: userId });
  ctx.set('Cache-Control', 'no-store');
  ctx.body = { redirect_to: redirectTo };
}

/** OAuth 2.0 provider (decisions.md): authorize handoff, token endpoint, consents. */
export function oauthProviderRoutes(router: Router<AppState, { services: ApiServices }>): void {
  const authorizeDoc = {
    path: '/v1/oauth/authorize',
    summary: 'Authorization-code handoff from the ID app (X-ID-App-Assertion required)',
    description:
      "Server-side handoff: the ID app sends X-ID-App-Assertion for the signed-in user with client_id, redirect_uri (registered exactly), response_type=code, scope (space separated; default: the client's allowed scopes), state, code_challenge and code_challenge_method=S256. The consent is recorded and the answer is {redirect_to} carrying code (single use, valid 60 s) and state.",
    tags: ['oauth'],
    auth: 'public' as const,
    // The route verifies X-ID-App-Assertion itself (assertedUser); a bearer credential does not count.
    security: [{ idAppAssertion: [] }],
    responses: {
      200: { description: 'Where to send the browser', schema: z.object({ redirect_to: z.string() }) },
      400: { description: 'Unknown client, unregistered redirect_uri or scope not allowed' },
      401: { description: 'Missing or invalid assertion' },
    },
  };
  defineRoute(router, { ...authorizeDoc, method: 'get', query: authorizeParams }, (ctx, { query }) =>
    handleAuthorize(ctx, query),
  );
  defineRoute(router, { ...authorizeDoc, method: 'post', body: authorizeParams }, (ctx, { body }) =>
    handleAuthorize(ctx, body),
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/oauth/token',
      summary: 'Token endpoint: authorization_code (PKCE S256) and refresh_token grants',
      description:
        'JSON or application/x-www-form-urlencoded. Confidential clients authenticate with HTTP Basic (RFC 6749 §2.3.1: `Authorization: Basic` of client_id:client_secret, each form-urlencoded first) or with client_id and client_secret in the body, not both; public clients send client_id alone. Refresh tokens rotate: each works once, and presenting a used one revokes every token of the grant. Errors carry the RFC 6749 code in `error` and the reason in `error_description` (and `message`), with Cache-Control: no-store: any malformed request (a missing, repeated or invalid parameter; malformed JSON; a body neither JSON nor a form) is 400 invalid_request, an unknown grant_type 400 unsupported_grant_type.',
      tags: ['oauth'],
      auth: 'public',
      authenticatesClients: true,
      oauthErrors: true,
      body: tokenBody,
      responses: {
        200: { description: 'Tokens', schema: tokenResponse },
        400: {
          description:
            'invalid_request (also a body that does not parse, or is neither JSON nor a form), invalid_grant, invalid_scope, unsupported_grant_type',
        },
        401: { description: 'invalid_client (with `WWW-Authenticate: Basic`)' },
      },
    },
    async (ctx, { body }) => {
      const s = ctx.services;
      if (body.grant_type !== 'authorization_code' && body.grant_type !== 'refresh_token') {
        throw oauthError(400, 'unsupported_grant_type', 'grant_type: must be authorization_code or refresh_token');
      }
      let client: OAuthClient;
      try {
        const { clientId, clientSecret } = clientCredentials(ctx, body);
        client = await authenticateClient(clientId, clientSecret);
      } catch (err) {
        // RFC 6749 §5.2: a failed client authentication names the scheme the client may use.
        if (err instanceof HttpError && err.status === 401) ctx.set('WWW-Authenticate', 'Basic realm="oauth"');
        throw err;
      }
      let tokens: TokenResponse;
      if (body.grant_type === 'authorization_code') {
        tokens = await exchangeAuthorizationCode(s, {
          client,
          code: body.code,
          redirectUri: body.redirect_uri,
          codeVerifier: body.code_verifier,
        });
      } else {
        tokens = await refreshAccessToken(s, {
          client,
          refreshToken: body.refresh_token,
          scopes: parseScopeParam(body.scope),
        });
      }
      ctx.set('Cache-Control', 'no-store');
      ctx.set('Pragma', 'no-cache');
      ctx.body = tokens;
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/me/consents',
      summary: 'Apps you have granted access to',
      tags: ['oauth'],
      auth: { account: ACCOUNT_SCOPES.consents },
      responses: { 200: { description: 'Active consents', schema: listSchema(consentSchema) } },
    },
    async (ctx) => {
      const p = ctx.state.principal;
      authorize(p, 'manage', subjects.ownConsents());
      ctx.body = resource(ctx, (await activeConsents(ctx.services.db, actingUserId(p)!)).map(presentConsent));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/users/me/consents/:client_id',
      summary: "Revoke an app's access: its tokens stop working at once",
      tags: ['oauth'],
      auth: { account: ACCOUNT_SCOPES.consents },
      params: z.object({ client_id: zUuid() }),
      responses: { 204: { description: 'Revoked' }, 404: { description: 'No active consent for this client' } },
    },
    async (ctx, { params }) => {
      const p = ctx.state.principal;
      authorize(p, 'manage', subjects.ownConsents());
      await revokeConsent(
        ctx.services,
        { userId: actingUserId(p)!, clientId: params.client_id },
        requestAttribution(ctx),
      );
      noContent(ctx);
    },
  );
}
