import { canonicalPath } from '../canonicalUrl';
import Router from '@koa/router';
import { revokeOtherSessions, revokeOwnSession } from '../../shared/commands/sessions';
import { ACCOUNT_SCOPES, authorize, Principal, subjects } from '../../shared/policies';
import { presentUserSessions, userSessionListSchema } from '../../shared/presenters/userSession';
import { liveUserSessions } from '../../shared/queries/sessions';
import { zUuid, z } from '../../shared/zod';
import { errorSchema } from '../openapiSpec';
import { defineRoute, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';
import { successSchema } from '../responses';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['sessions'];

/** The caller's user and current session; these routes need a session token (spec §4.13). */
function sessionCaller(p: Principal): { userId: string; sessionId: string } {
  authorize(p, 'manage', subjects.ownSessions());
  // The policy admits only session credentials, which always carry both.
  const { userId, sessionId } = p as Extract<Principal, { kind: 'user' }>;
  return { userId, sessionId: sessionId! };
}

/** A user's own active sessions: list, revoke one, revoke all others. */
export function userSessionRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/me/sessions',
      summary: 'My active sessions',
      tags: TAG,
      auth: { account: ACCOUNT_SCOPES.sessions },
      responses: { 200: { description: '{sessions, current_session_id, _links}', schema: userSessionListSchema } },
    },
    async (ctx) => {
      const { userId, sessionId } = sessionCaller(ctx.state.principal);
      const db = ctx.services.db;
      const { sessions, platformNames } = await liveUserSessions(db, userId);
      ctx.body = presentUserSessions(sessions, sessionId, platformNames, canonicalPath(ctx));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/users/me/sessions/:session_id',
      summary: 'Revoke one of my sessions',
      tags: TAG,
      auth: { account: ACCOUNT_SCOPES.sessions },
      params: z.object({ session_id: zUuid() }),
      responses: {
        200: { description: '{success, message}', schema: successSchema },
        400: {
          description: 'An invalid session_id, or the current session (then also `success: false`; sign out instead)',
          schema: errorSchema.extend({ success: z.literal(false).optional() }),
        },
        404: { description: 'No such session' },
      },
    },
    async (ctx, { params }) => {
      const { userId, sessionId } = sessionCaller(ctx.state.principal);
      await revokeOwnSession(ctx.services, userId, sessionId, params.session_id, requestAttribution(ctx));
      ctx.body = { success: true, message: 'session revoked' };
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/users/me/sessions',
      summary: 'Revoke all my sessions except the current one',
      tags: TAG,
      auth: { account: ACCOUNT_SCOPES.sessions },
      responses: {
        200: {
          description: '{success, revoked_count, message}',
          schema: successSchema.extend({ revoked_count: z.number().int() }),
        },
      },
    },
    async (ctx) => {
      const { userId, sessionId } = sessionCaller(ctx.state.principal);
      const ids = await revokeOtherSessions(ctx.services, userId, sessionId, requestAttribution(ctx));
      ctx.body = {
        success: true,
        revoked_count: ids.length,
        message: ids.length ? `revoked ${ids.length} other session(s)` : 'no other sessions',
      };
    },
  );
}
