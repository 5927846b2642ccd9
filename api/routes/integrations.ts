import Router from '@koa/router';
import { disconnectIntegration, setBotStatus } from '../../shared/commands/integrations';
import { integrationStats, refreshIntegrationTokens } from '../../shared/commands/integrationTokens';
import { integrationPlatform } from '../../shared/integrations/platforms';
import { Integration } from '../../shared/models/Integration';
import { Action, authorize, authorizeSelf, Principal, subjects } from '../../shared/policies';
import {
  channelStatsSchema,
  integrationSchema,
  presentChannelStats,
  presentIntegration,
} from '../../shared/presenters/integration';
import { integrationsOf } from '../../shared/queries/integrations';
import { findOr404 } from '../../shared/rowLoader';
import { z, zUuid } from '../../shared/zod';
import { resource, resourceSchema } from '../responses';
import { AppState, defineRoute, requestAttribution } from '../routing';
import type { ApiServices } from '../services';
import { platformOr404, slugParam } from './integrationConnect';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['integrations'];
const READ = { own: 'integrations:read' };
const WRITE = { own: 'integrations:write' };
const idParam = z.object({ id: zUuid() });
const successSchema = z.object({ success: z.boolean(), message: z.string() });
const upstreamFailure = { description: 'The stream platform failed or did not answer in time ({error, message})' };

const platformName = (slug: string) => integrationPlatform(slug)?.name ?? slug;
const present = (i: Integration) => presentIntegration(i, platformName(i.platform_slug));

/** The integration with this id if it is the caller's (anyone else's is a 404, like a missing one). */
async function loadIntegration(p: Principal, id: string, action: Action<'integration'>): Promise<Integration> {
  const integration = await findOr404(Integration, id, 'integration');
  authorize(p, action, subjects.integration(integration));
  return integration;
}

/** The caller's stream-platform integrations (spec §4.25): list, read, stats, refresh, bot status, disconnect. */
export function integrationRoutes(router: ApiRouter): void {
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
        200: {
          description: 'Bare array (spec §4.25: same format as GET /v1/integrations)',
          schema: z.array(integrationSchema),
        },
        404: { description: 'No such platform' },
      },
    },
    async (ctx, { params }) => {
      const userId = authorizeSelf(ctx.state.principal);
      const platform = platformOr404(params.slug);
      const rows = await integrationsOf(ctx.services.db).load(userId);
      ctx.body = rows.filter((r) => r.platform_slug === platform.slug).map(present);
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
      responses: { 200: { description: 'Bare array, oldest first (spec §4.25)', schema: z.array(integrationSchema) } },
    },
    async (ctx) => {
      const userId = authorizeSelf(ctx.state.principal);
      const rows = await integrationsOf(ctx.services.db).load(userId);
      ctx.body = rows.map(present);
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
        503: { description: "The integration's platform is not configured on this server" },
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
        503: { description: "The integration's platform is not configured on this server" },
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
