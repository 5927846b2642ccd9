import Router from '@koa/router';
import { createInternalSession, endSession } from '../../shared/commands/sessions';
import { notFound } from '../../shared/errors';
import { internalSessionSchema, presentInternalSession } from '../../shared/presenters/session';
import { findSessionByToken } from '../../shared/queries/sessions';
import { z, zChars, zDateTime, zUuid } from '../../shared/zod';
import { headerText } from '../params';
import { defineRoute, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';
import { created, noContent, resource, resourceSchema } from '../responses';

const LOGOUT_REASONS = ['user_initiated', 'token_deleted', 'session_expired', 'revoked', 'no_access'] as const;

const tokenParam = z.object({ token: zChars({ min: 8, max: 512 }) });

/** Internal session store for the first-party web app (spec §4.14, system key only). */
export function sessionRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/sessions',
      summary: 'Create an internal session for a user',
      tags: ['sessions'],
      auth: 'internal',
      description:
        'provider (optional, beyond the spec): the slug of the sign-in platform the session is for, shown as the ' +
        'session’s provider in GET /v1/users/me/sessions. Without it, the platform of the user’s most recently ' +
        'used platform account: the one POST /v1/users/oauth has just signed in with.',
      body: z.object({
        userId: zUuid(),
        expires: zDateTime(),
        provider: z
          .string()
          .regex(/^[a-z0-9_-]{1,64}$/, 'must be a platform slug')
          .optional(),
      }),
      bodyExample: { userId: '0b6f3c1e-4d8a-4f57-9a0e-2a1d5c7e9b10', expires: '2026-12-31T23:59:59Z' },
      responses: {
        201: { description: 'Created session with its sessionToken', schema: resourceSchema(internalSessionSchema) },
        403: { description: 'The user is banned (no session is created)' },
      },
    },
    async (ctx, { body }) => {
      const by = requestAttribution(ctx);
      const { session, token } = await createInternalSession(
        ctx.services,
        body.userId,
        new Date(body.expires),
        by,
        body.provider,
      );
      // No Location: its path holds the session token, a secret, which headers carry into more
      // logs than bodies do (the body's self link is the spec's, answered to the system key only).
      created(ctx, resource(ctx, presentInternalSession(session, token), `/v1/sessions/${token}`), null);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/sessions/:token',
      summary: 'Get an internal session by token',
      tags: ['sessions'],
      auth: 'internal',
      params: tokenParam,
      responses: { 200: { description: 'The session', schema: resourceSchema(internalSessionSchema) } },
    },
    async (ctx, { params }) => {
      const session = await findSessionByToken(ctx.services.db, params.token);
      if (!session) throw notFound('session');
      ctx.body = resource(ctx, presentInternalSession(session, params.token));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/sessions/:token',
      summary: 'Delete an internal session (logout) and record the logout audit event',
      tags: ['sessions'],
      auth: 'internal',
      params: tokenParam,
      query: z.object({ reason: z.enum(LOGOUT_REASONS).default('user_initiated') }),
      responses: { 204: { description: 'Deleted' }, 404: { description: 'No such session' } },
    },
    async (ctx, { params, query }) => {
      const app = headerText(ctx, 'x-source-service');
      await endSession(ctx.services, params.token, { reason: query.reason, app }, requestAttribution(ctx));
      noContent(ctx);
    },
  );
}
