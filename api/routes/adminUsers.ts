import Router from '@koa/router';
import { cancelDeletion, purgeUser } from '../../shared/commands/userLifecycle';
import { notFound } from '../../shared/errors';
import { z, zChars } from '../../shared/zod';
import { successSchema } from '../responses';
import { defineRoute, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';
import { loadUser, resolveUserRef, userIdParam } from '../params';
import { deletionStatusSchema, presentDeletionStatus } from '../../shared/presenters/deletionStatus';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['admin'];

/** Account deletion administration (spec §3 User deletion, §4.18). */
export function adminUserRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/admin/users/:id/deletion-status',
      summary: "A user's deletion state",
      tags: TAG,
      auth: { permission: 'users:read' },
      params: userIdParam,
      responses: { 200: { description: 'Deletion state', schema: deletionStatusSchema } },
    },
    async (ctx, { params }) => {
      const user = await loadUser(ctx.services.db, resolveUserRef(ctx, params.id), { includeDeleted: true });
      ctx.body = presentDeletionStatus(user);
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/admin/users/:id/force-delete',
      summary: 'Delete a user now, skipping the grace period (irreversible)',
      description:
        "For an account scheduled for deletion or soft-deleted (an active one is a 409: delete it first). The user row and everything hanging off it are removed, mails to the user leave the outbox and the user's audit events lose their personal fields.",
      tags: TAG,
      auth: { permission: 'users:delete', manages: 'id' },
      params: userIdParam,
      body: z.object({ reason: zChars({ trim: true, min: 1, max: 1000 }).optional() }),
      responses: {
        200: { description: '{success, message}', schema: successSchema },
        400: { description: 'Deleting oneself' },
        404: { description: 'No such user' },
        409: { description: 'No deletion scheduled: the account is active (delete it first)' },
      },
    },
    async (ctx, { params, body }) => {
      const id = resolveUserRef(ctx, params.id);
      await loadUser(ctx.services.db, id, { includeDeleted: true });
      if (
        !(await purgeUser(ctx.services, id, {
          ...requestAttribution(ctx),
          reason: body.reason ?? 'deleted by an administrator',
        }))
      )
        throw notFound('user');
      ctx.body = { success: true, message: 'the user and their personal data were permanently deleted' };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/admin/users/:id/cancel-deletion',
      summary: 'Cancel a scheduled deletion (and restore a soft-deleted user)',
      tags: TAG,
      auth: { permission: 'users:write', manages: 'id' },
      params: userIdParam,
      responses: {
        200: { description: '{success, message}', schema: successSchema },
        404: { description: 'No such user' },
        409: { description: "No deletion scheduled, or a soft-deleted account's address is now another user's" },
      },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      const { wasDeleted } = await cancelDeletion(ctx.services, id, requestAttribution(ctx));
      ctx.body = {
        success: true,
        message: wasDeleted
          ? 'deletion cancelled; the account is restored (its API keys stay deactivated, its OAuth grants revoked)'
          : 'the scheduled deletion was cancelled',
      };
    },
  );
}
