import Router from '@koa/router';
import { takeConnectState } from '../../shared/caches/integrationStates';
import {
  completeConnect,
  ConnectFailed,
  disconnectIntegration,
  setBotStatus,
  startConnect,
} from '../../shared/commands/integrations';
import { integrationStats, refreshIntegrationTokens } from '../../shared/commands/integrationTokens';
import { badRequest, notFound } from '../../shared/errors';
import {
  INTEGRATION_PLATFORMS,
  integrationPlatform,
  IntegrationPlatform,
  platformEnabled,
} from '../../shared/integrations/platforms';
import { Integration } from '../../shared/models/Integration';
import { Action, authorize, authorizeSelf, Principal, subjects } from '../../shared/policies';
import {
  channelStatsSchema,
  integrationSchema,
  platformSchema,
  platformScopesSchema,
  presentChannelStats,
  presentIntegration,
  presentPlatform,
  presentPlatformScopes,
} from '../../shared/presenters/integration';
import { findOr404 } from '../../shared/rowLoader';
import { z, zHttpUrl, zUuid } from '../../shared/zod';
import { listSchema, resource, resourceSchema } from '../responses';
import { AppState, defineRoute, requestAttribution } from '../routing';
import type { ApiServices } from '../services';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['integrations'];
const READ = { own: 'integrations:read' };
const WRITE = { own: 'integrations:write' };
const idParam = z.object({ id: zUuid() });
const slugParam = z.object({ slug: z.string().max(64) });
const successSchema = z.object({ success: z.boolean(), message: z.string() });
const upstreamFailure = { description: 'The stream platform failed or did not answer in time ({error, message})' };

/** The platform with this slug, or 404. */
function platformOr404(slug: string): IntegrationPlatform {
  const platform = integrationPlatform(slug);
  if (!platform) throw notFound('platform');
  return platform;
}

const platformName = (slug: string) => integrationPlatform(slug)?.name ?? slug;
const present = (i: Integration) => presentIntegration(i, platformName(i.platform_slug));

/** The integration with this id if it is the caller's (anyone else's is a 404, like a missing one). */
async function loadIntegration(p: Principal, id: string, action: Action<'integration'>): Promise<Integration> {
  const integration = await findOr404(Integration, id, 'integration');
  authorize(p, action, subjects.integration(integration));
  return integration;
}

/** Only a short machine code of the platform's `error` reaches the client's redirect_uri. */
const providerError = (e: string) => (/^[a-z_]{1,64}$/.test(e) ? e : 'access_denied');

/** Stream-platform integrations (spec §4.25). */
export function integrationRoutes(router: ApiRouter): void {
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
      ctx.body = presentPlatformScopes(platformOr404(params.slug));
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/integrations/platform/:slug',
      summary: "The caller's integrations with one platform",
      tags: TAG,
      auth: READ,
      params: slugParam,
      responses: {
        200: { description: 'Bare list', schema: listSchema(integrationSchema) },
        404: { description: 'No such platform' },
      },
    },
    async (ctx, { params }) => {
      const userId = authorizeSelf(ctx.state.principal);
      const platform = platformOr404(params.slug);
      const rows = await Integration.query(ctx.services.db)
        .where({ user_id: userId, platform_slug: platform.slug })
        .orderBy('connected_at');
      ctx.body = resource(ctx, rows.map(present));
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
      auth: WRITE,
      params: slugParam,
      body: z.object({ redirect_uri: zHttpUrl(), scopes: z.array(z.string().max(100)).max(50).optional() }),
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
      params: z.object({ platform: z.string().max(64) }),
      query: z.object({
        state: z.string().min(1).max(512),
        code: z.string().min(1).max(2048).optional(),
        error: z.string().max(256).optional(),
        error_description: z.string().max(2048).optional(),
        scope: z.string().max(4096).optional(),
      }),
      responses: {
        302: { description: 'To redirect_uri with integration_id or error' },
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
          const integration = await completeConnect(ctx.services, pending, query.code, by);
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
      ctx.redirect(target.toString());
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/integrations',
      summary: "The caller's integrations",
      tags: TAG,
      auth: READ,
      responses: { 200: { description: 'Bare list, oldest first', schema: listSchema(integrationSchema) } },
    },
    async (ctx) => {
      const userId = authorizeSelf(ctx.state.principal);
      const rows = await Integration.query(ctx.services.db).where('user_id', userId).orderBy('connected_at');
      ctx.body = resource(ctx, rows.map(present));
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/integrations/:id',
      summary: 'One of your integrations',
      tags: TAG,
      auth: READ,
      params: idParam,
      responses: {
        200: { description: 'Integration', schema: resourceSchema(integrationSchema) },
        404: { description: 'No such integration of yours' },
      },
    },
    async (ctx, { params }) => {
      ctx.body = resource(ctx, present(await loadIntegration(ctx.state.principal, params.id, 'read')));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/integrations/:id',
      summary: 'Disconnect an integration (its token is revoked at the platform)',
      tags: TAG,
      auth: WRITE,
      params: idParam,
      responses: {
        200: { description: '{success, message}', schema: successSchema },
        404: { description: 'No such integration of yours' },
        502: upstreamFailure,
      },
    },
    async (ctx, { params }) => {
      const integration = await loadIntegration(ctx.state.principal, params.id, 'delete');
      await disconnectIntegration(ctx.services, integration, requestAttribution(ctx));
      ctx.body = { success: true, message: 'integration disconnected and its token revoked' };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/integrations/:id/refresh',
      summary: "Refresh the integration's OAuth token",
      tags: TAG,
      auth: WRITE,
      params: idParam,
      responses: {
        200: {
          description: '{success, message, expires_at}',
          schema: successSchema.extend({ expires_at: z.string().nullable() }),
        },
        404: { description: 'No such integration of yours' },
        502: upstreamFailure,
      },
    },
    async (ctx, { params }) => {
      const integration = await loadIntegration(ctx.state.principal, params.id, 'refresh');
      const row = await refreshIntegrationTokens(ctx.services, integration);
      ctx.body = { success: true, message: 'token refreshed', expires_at: row.token_expires_at?.toISOString() ?? null };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/integrations/:id/stats',
      summary: "The channel's stats from the platform",
      description: 'An access token the platform rejects is refreshed once and the call retried.',
      tags: TAG,
      auth: READ,
      params: idParam,
      responses: {
        200: { description: '{success, stats}', schema: z.object({ success: z.boolean(), stats: channelStatsSchema }) },
        404: { description: 'No such integration of yours' },
        409: { description: 'Inactive integration' },
        502: upstreamFailure,
      },
    },
    async (ctx, { params }) => {
      const integration = await loadIntegration(ctx.state.principal, params.id, 'read');
      const stats = await integrationStats(ctx.services, integration);
      ctx.body = { success: true, stats: presentChannelStats(stats, new Date()) };
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/integrations/:id/stream-status',
      summary: "Set the stream bot's status for the integration",
      tags: TAG,
      auth: WRITE,
      params: idParam,
      body: z.object({ bot_status: z.enum(['active', 'paused', 'disabled']) }),
      responses: {
        200: {
          description: '{success, bot_status}',
          schema: z.object({ success: z.boolean(), bot_status: z.string() }),
        },
        400: { description: 'bot_status is not active, paused or disabled' },
        404: { description: 'No such integration of yours' },
      },
    },
    async (ctx, { params, body }) => {
      const integration = await loadIntegration(ctx.state.principal, params.id, 'update');
      const row = await setBotStatus(ctx.services, integration, body.bot_status);
      ctx.body = { success: true, bot_status: row.bot_status };
    },
  );
}
