import Router from '@koa/router';
import { createSession, findSessionByToken } from '../../shared/commands/sessions';
import { recordAuditEvent } from '../../shared/audit';
import { badRequest, notFound } from '../../shared/errors';
import { Session } from '../../shared/models/Session';
import { User } from '../../shared/models/User';
import { presentInternalSession } from '../../shared/presenters/session';
import { sha256 } from '../../shared/crypto';
import { z, zUuid } from '../../shared/zod';
import { defineRoute, AppState } from '../routing';
import type { ApiServices } from '../services';
import { created, noContent } from '../responses';

export const LOGOUT_REASONS = ['user_initiated', 'token_deleted', 'session_expired', 'revoked', 'no_access'] as const;

const tokenParam = z.object({ token: z.string().min(8).max(512) });

/** Internal session store for the first-party web app (spec §4.14, system key only). */
export function sessionRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/sessions',
      summary: 'Create an internal session for a user',
      tags: ['sessions'],
      auth: 'system',
      body: z.object({ userId: zUuid(), expires: z.string().datetime({ offset: true, message: 'must be an ISO 8601 date-time' }) }),
      responses: { 201: { description: 'Created session with its sessionToken' } },
    },
    async (ctx, { body }) => {
      const expires = new Date(body.expires);
      if (expires.getTime() <= Date.now()) throw badRequest('expires: must be in the future');
      const user = await User.query().findById(body.userId).whereNull('deleted_at');
      if (!user) throw badRequest('userId: no such user');
      const { session, token } = await createSession(user.id, expires, { ipAddress: ctx.ip, userAgent: ctx.get('user-agent') || null });
      created(ctx, { data: presentInternalSession(session, token), _links: { self: `/v1/sessions/${token}` } });
    },
  );

  defineRoute(router, { method: 'get', path: '/v1/sessions/:token', summary: 'Get an internal session by token', tags: ['sessions'], auth: 'system', params: tokenParam }, async (ctx, { params }) => {
    const session = await findSessionByToken(params.token);
    if (!session) throw notFound('session');
    ctx.body = { data: presentInternalSession(session, params.token), _links: { self: ctx.path } };
  });

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/sessions/:token',
      summary: 'Delete an internal session (logout) and record the logout audit event',
      tags: ['sessions'],
      auth: 'system',
      params: tokenParam,
      query: z.object({ reason: z.enum(LOGOUT_REASONS).default('user_initiated') }),
      responses: { 204: { description: 'Deleted' }, 404: { description: 'No such session' } },
    },
    async (ctx, { params, query }) => {
      const s = ctx.services;
      const session = await Session.query().findOne({ token_hash: sha256(params.token) });
      if (!session) throw notFound('session');
      const app = ctx.get('x-source-service') || null;
      await s.db.transaction(async (trx) => {
        await Session.query(trx).deleteById(session.id);
        await recordAuditEvent(
          {
            user_id: session.user_id,
            event_type: 'logout',
            resource_type: 'session',
            resource_id: session.id,
            actor_id: session.user_id,
            ip_address: ctx.ip,
            user_agent: ctx.get('user-agent') || null,
            metadata: { reason: query.reason, session_id: session.id, app },
            source_service: 'api',
          },
          trx,
        );
      });
      // After the commit: every instance drops the cached credential, clients hear of it.
      await s.bus.invalidateAuth({ userId: session.user_id });
      await s.bus.publishToUser(session.user_id, { type: 'sessionRevoked', userId: session.user_id, sessionId: session.id, reason: query.reason, timestamp: new Date().toISOString() });
      noContent(ctx);
    },
  );
}
