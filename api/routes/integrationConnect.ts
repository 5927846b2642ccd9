import Router from '@koa/router';
import { principalForUser } from '../../shared/auth/wsTickets';
import { takeConnectState } from '../../shared/caches/integrationStates';
import { completeConnect, ConnectFailed, startConnect } from '../../shared/commands/integrations';
import { badRequest, notFound } from '../../shared/errors';
import {
  INTEGRATION_PLATFORMS,
  integrationPlatform,
  IntegrationPlatform,
  platformEnabled,
} from '../../shared/integrations/platforms';
import { authorize, authorizeSelf, subjects } from '../../shared/policies';
import {
  platformSchema,
  platformScopesSchema,
  presentPlatform,
  presentPlatformScopes,
} from '../../shared/presenters/integration';
import { z, zChars, zHttpUrl, zList } from '../../shared/zod';
import { AppState, defineRoute, requestAttribution } from '../routing';
import type { ApiServices } from '../services';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['integrations'];
export const slugParam = z.object({ slug: zChars({ max: 64 }) });

/** The platform with this slug, or 404. */
export function platformOr404(slug: string): IntegrationPlatform {
  const platform = integrationPlatform(slug);
  if (!platform) throw notFound('platform');
  return platform;
}

/** GET …/scopes as UTF-8 bytes per platform (the catalogue is code). */
const scopesJson = new WeakMap<IntegrationPlatform, Buffer>();

/** Only a short machine code of the platform's `error` reaches the client's redirect_uri. */
const providerError = (e: string) => (/^[a-z_]{1,64}$/.test(e) ? e : 'access_denied');

/**
 * Stream platforms and connecting to them (spec §4.25): the catalogue, the connect that starts the
 * OAuth flow and the callback the platform sends the browser back to. Mounted before
 * integrationRoutes, so `/v1/integrations/platforms` is not taken for an id.
 */
export function integrationConnectRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/integrations/platforms',
      summary: 'Stream platforms an integration can connect to',
      tags: TAG,
      auth: 'authenticated',
      responses: { 200: { description: '{platforms}', schema: z.object({ platforms: z.array(platformSchema) }) } },
    },
    (ctx) => {
      const cfg = ctx.services.config;
      ctx.body = { platforms: INTEGRATION_PLATFORMS.map((p) => presentPlatform(p, platformEnabled(cfg, p))) };
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/integrations/platform/:slug/scopes',
      summary: "A platform's OAuth scopes and which are always requested",
      tags: TAG,
      auth: 'authenticated',
      params: slugParam,
      responses: {
        200: { description: '{platform, scopes}', schema: platformScopesSchema },
        404: { description: 'No such platform' },
      },
    },
    (ctx, { params }) => {
      // Code, not data: the answer is serialised once per platform (README "Static answers").
      const platform = platformOr404(params.slug);
      let json = scopesJson.get(platform);
      if (!json) scopesJson.set(platform, (json = Buffer.from(JSON.stringify(presentPlatformScopes(platform)))));
      ctx.type = 'application/json';
      ctx.body = json;
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/integrations/platform/:slug/connect',
      summary: 'Start connecting a platform account (OAuth authorization code flow)',
      description:
        "Returns the platform's authorization URL and a single-use state (10 minutes), bound to you and redirect_uri. After the platform, the browser lands on redirect_uri with integration_id=<id> or error=<code>. Required scopes are always added.",
      tags: TAG,
      auth: { own: 'integrations:write' },
      params: slugParam,
      body: z.object({ redirect_uri: zHttpUrl(), scopes: zList(zChars({ max: 100 }), { max: 50 }).optional() }),
      responses: {
        200: {
          description: '{authorization_url, state}',
          schema: z.object({ authorization_url: z.string(), state: z.string() }),
        },
        404: { description: 'No such platform' },
        503: { description: 'The platform is not configured on this server' },
      },
    },
    async (ctx, { params, body }) => {
      const userId = authorizeSelf(ctx.state.principal);
      const platform = platformOr404(params.slug);
      ctx.body = await startConnect(ctx.services, userId, platform, {
        redirectUri: body.redirect_uri,
        scopes: body.scopes,
        credential: ctx.state.token ? ctx.services.credentials.describe(ctx.state.token) : undefined,
      });
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/integrations/callback/:platform',
      summary: "The platform's OAuth redirect back to the service",
      description:
        "Reached by the user's browser: the state authenticates it (a Bearer credential sent along must be the same user's). Redirects (302) to the connect's redirect_uri with integration_id or error. An unknown, expired or used state is a 400.",
      tags: TAG,
      auth: 'public',
      params: z.object({ platform: zChars({ max: 64 }) }),
      query: z.object({
        state: zChars({ min: 1, max: 512 }),
        code: zChars({ min: 1, max: 2048 }).optional(),
        error: zChars({ max: 256 }).optional(),
        error_description: zChars({ max: 2048 }).optional(),
        scope: zChars({ max: 4096 }).optional(),
      }),
      responses: {
        302: { description: 'To redirect_uri with integration_id or error, in the Location header; no body' },
        400: { description: 'Unknown, expired or used state' },
        403: { description: 'The Bearer credential sent is another user' },
      },
    },
    async (ctx, { params, query }) => {
      const pending = await takeConnectState(ctx.services.redis, ctx.services.config, query.state);
      if (!pending || pending.platform !== params.platform)
        throw badRequest('state: unknown, expired or already used; start the connection again');
      authorize(ctx.state.principal, 'complete', subjects.integrationConnect(pending.userId));
      const target = new URL(pending.redirectUri);
      if (query.error || !query.code) {
        target.searchParams.set('error', query.error ? providerError(query.error) : 'invalid_request');
      } else {
        try {
          const by = { ...requestAttribution(ctx), actorId: pending.userId };
          // The credential that started the connect, as it is now (a state of an earlier build names
          // none: its user as they are now).
          const starter = pending.credential
            ? await ctx.services.credentials.resolveStored(pending.credential)
            : await principalForUser(ctx.services.db, { userId: pending.userId, sessionId: null, via: 'session' });
          const integration = await completeConnect(ctx.services, pending, query.code, by, starter);
          target.searchParams.set('integration_id', integration.id);
        } catch (err) {
          if (!(err instanceof ConnectFailed)) throw err;
          ctx.services.logger.warn(
            { platform: pending.platform, code: err.code, reason: err.message },
            'integration connect failed',
          );
          target.searchParams.set('error', err.code);
        }
      }
      ctx.set('Cache-Control', 'no-store');
      ctx.set('Referrer-Policy', 'no-referrer');
      // Location and an empty body: Koa's ctx.redirect() would add a text/html "Redirecting to …"
      // the document does not declare. The null body first (Koa makes it a 204), then the status,
      // and Content-Length 0 (else Node sends the empty body chunked).
      ctx.set('Location', target.toString());
      ctx.body = null;
      ctx.status = 302;
      ctx.length = 0;
    },
  );
}
