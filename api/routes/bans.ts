import Router from '@koa/router';
import { banUser, unbanUser } from '../../shared/commands/userLifecycle';
import { banHistory, userActiveBan } from '../../shared/queries/users';
import { notFound } from '../../shared/errors';
import {
  banHistoryEntrySchema,
  banSchema,
  banStatusSchema,
  presentBan,
  presentBanHistoryEntry,
  presentBanStatus,
} from '../../shared/presenters/ban';
import { z, zChars } from '../../shared/zod';
import { defineRoute, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';
import { loadUser, resolveUserRef, userIdParam } from '../params';
import { created, listSchema, resource, resourceSchema, successSchema } from '../responses';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['bans'];

/** Bans (spec §4.18): active ban, ban, unban, history. */
export function banRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/:id/ban',
      summary: "A user's active ban",
      tags: TAG,
      auth: { permission: 'users:read', self: 'id' },
      params: userIdParam,
      responses: { 200: { description: '{is_banned, active_ban}', schema: banStatusSchema } },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      const active = await userActiveBan(ctx.services.db, id);
      if (!active) throw notFound('user');
      ctx.body = presentBanStatus(active.row);
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/:id/ban',
      summary: 'Ban a user',
      description:
        'Permanent when duration_seconds is null or absent. The user is signed out everywhere at once (accountBanned and forceLogout pushes); a timed ban ends by itself at expires_at.',
      tags: TAG,
      auth: { permission: 'users:ban', manages: 'id' },
      params: userIdParam,
      body: z.object({
        reason: zChars({ trim: true, max: 1000 }).nullable().optional(),
        duration_seconds: z
          .number({ invalid_type_error: 'must be an integer' })
          .int('must be an integer')
          .min(1)
          .max(100 * 365 * 86400)
          .nullable()
          .optional(),
      }),
      responses: {
        201: { description: '{data: Ban}', schema: resourceSchema(banSchema) },
        400: { description: 'Banning oneself' },
        403: { description: 'Target holds more power' },
        404: { description: 'No such user' },
        409: { description: 'Already banned, or this would leave no administrator (a user holding *:*)' },
      },
    },
    async (ctx, { params, body }) => {
      const db = ctx.services.db;
      const id = resolveUserRef(ctx, params.id);
      await loadUser(db, id);
      const ban = await banUser(
        ctx.services,
        { userId: id, reason: body.reason ?? null, durationSeconds: body.duration_seconds ?? null },
        requestAttribution(ctx),
      );
      created(ctx, resource(ctx, presentBan(ban), `/v1/users/${id}/ban`));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/users/:id/ban',
      summary: 'Lift the active ban',
      tags: TAG,
      auth: { permission: 'users:ban', manages: 'id' },
      params: userIdParam,
      responses: {
        200: { description: '{success, message}', schema: successSchema },
        404: { description: 'Not banned' },
      },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await loadUser(ctx.services.db, id, { includeDeleted: true });
      await unbanUser(ctx.services, id, requestAttribution(ctx));
      ctx.body = { success: true, message: 'user unbanned' };
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/:id/bans',
      summary: "A user's ban history",
      tags: TAG,
      auth: { permission: 'users:read' },
      params: userIdParam,
      responses: {
        200: { description: '{data: [Ban with unbanned_at, unbanned_by]}', schema: listSchema(banHistoryEntrySchema) },
      },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      // The user (404) and the history in the same turn's batches: one round trip.
      const [, bans] = await Promise.all([
        loadUser(ctx.services.db, id, { includeDeleted: true }),
        banHistory(ctx.services.db, id),
      ]);
      ctx.body = resource(ctx, bans.map(presentBanHistoryEntry));
    },
  );
}
