import Router from '@koa/router';
import { recordAuditEvent } from '../../shared/audit';
import { announceSessionsRevoked, deleteUserSessions } from '../../shared/commands/userLifecycle';
import { badRequest, forbidden, notFound } from '../../shared/errors';
import { Platform } from '../../shared/models/Platform';
import { Session } from '../../shared/models/Session';
import { ACCOUNT_SCOPES, Principal, requireUser } from '../../shared/policies';
import { presentUserSession } from '../../shared/presenters/userSession';
import { zUuid, z } from '../../shared/zod';
import { defineRoute, AppContext, AppState } from '../routing';
import type { ApiServices } from '../services';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['sessions'];
const REASON = 'revoked_by_user';

/** The caller's user and current session; these routes need a session token (spec §4.13). */
function sessionCaller(p: Principal): { userId: string; sessionId: string } {
  requireUser(p, 'this endpoint needs a session token');
  if (p.via !== 'session' || !p.sessionId) throw forbidden('this endpoint needs a session token');
  return { userId: p.userId, sessionId: p.sessionId };
}

function audit(ctx: AppContext, userId: string, sessionIds: string[]) {
  return recordAuditEvent({
    user_id: userId,
    actor_id: userId,
    event_type: 'session_revoked',
    resource_type: 'session',
    resource_id: sessionIds.length === 1 ? sessionIds[0] : null,
    ip_address: ctx.ip,
    user_agent: ctx.get('user-agent') || null,
    metadata: { reason: REASON, session_ids: sessionIds },
  });
}

/** A user's own active sessions: list, revoke one, revoke all others. */
export function userSessionRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    { method: 'get', path: '/v1/users/me/sessions', summary: 'My active sessions', tags: TAG, auth: { account: ACCOUNT_SCOPES.sessions }, responses: { 200: { description: '{sessions, current_session_id, _links}' } } },
    async (ctx) => {
      const { userId, sessionId } = sessionCaller(ctx.state.principal);
      const db = ctx.services.db;
      const [sessions, platforms] = await Promise.all([
        Session.query(db).where('user_id', userId).where('expires_at', '>', new Date()).orderBy('last_activity_at', 'desc').orderBy('id'),
        Platform.query(db).select('slug', 'name'),
      ]);
      const names = new Map(platforms.map((p) => [p.slug, p.name]));
      ctx.body = { sessions: sessions.map((s) => presentUserSession(s, sessionId, names)), current_session_id: sessionId, _links: { self: ctx.path } };
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
      responses: { 200: { description: '{success, message}' }, 400: { description: '{success: false, message}: the current session' }, 404: { description: 'No such session' } },
    },
    async (ctx, { params }) => {
      const { userId, sessionId } = sessionCaller(ctx.state.principal);
      if (params.session_id === sessionId) throw badRequest('cannot revoke the current session; sign out instead', { success: false });
      const deleted = await Session.query(ctx.services.db).where({ id: params.session_id, user_id: userId }).delete();
      if (!deleted) throw notFound('session');
      await audit(ctx, userId, [params.session_id]);
      await announceSessionsRevoked(ctx.services, userId, [params.session_id], REASON);
      ctx.body = { success: true, message: 'session revoked' };
    },
  );

  defineRoute(
    router,
    { method: 'delete', path: '/v1/users/me/sessions', summary: 'Revoke all my sessions except the current one', tags: TAG, auth: { account: ACCOUNT_SCOPES.sessions }, responses: { 200: { description: '{success, revoked_count, message}' } } },
    async (ctx) => {
      const { userId, sessionId } = sessionCaller(ctx.state.principal);
      const ids = await deleteUserSessions(ctx.services.db, userId, sessionId);
      if (ids.length) {
        await audit(ctx, userId, ids);
        await announceSessionsRevoked(ctx.services, userId, ids, REASON);
      }
      ctx.body = { success: true, revoked_count: ids.length, message: ids.length ? `revoked ${ids.length} other session(s)` : 'no other sessions' };
    },
  );
}
