import Router from '@koa/router';
import { HttpError } from '../../shared/errors';
import { parseUserAgent } from '../../shared/userAgent';
import { headerText } from '../params';
import { z } from '../../shared/zod';
import { defineRoute, AppState } from '../routing';
import type { ApiServices } from '../services';
import { uptimeParts, uptimeSchema } from './health';

const LINKS = Object.freeze({
  self: '/v1',
  health: '/v1/health',
  openapi: '/v1/openapi.json',
  docs: '/v1/swagger-ui/',
  graphql: '/v1/gql',
  schema: '/v1/schema',
  websocket: '/v1/ws',
});

const infoSchema = z
  .object({
    version: z.string(),
    server: z.object({ uptime: uptimeSchema }),
    client: z.object({
      ip: z.string(),
      userAgent: z.string().nullable(),
      browser: z.unknown(),
      os: z.unknown(),
    }),
    timestamp: z.string().datetime(),
    _links: z.record(z.string()),
  })
  .openapi('ServiceInfo');

/** GET /v1 (service and client info) and the POST /v1/auth/validate placeholder. */
export function infoRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1',
      summary: 'API version, server uptime and what the server sees of the client',
      tags: ['health'],
      auth: 'public',
      responses: { 200: { description: 'Version, uptime and client', schema: infoSchema } },
    },
    (ctx) => {
      const ua = headerText(ctx, 'user-agent') ?? '';
      const parsed = parseUserAgent(ua);
      ctx.body = {
        version: ctx.services.version,
        server: { uptime: uptimeParts(ctx.services.startedAt) },
        client: { ip: ctx.ip, userAgent: ua || null, browser: parsed.browser, os: parsed.os },
        timestamp: new Date().toISOString(),
        _links: LINKS,
      };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/validate',
      summary: 'Token validation placeholder (always 501)',
      description:
        'Body {token} (spec §4.1), not read: any body the service can parse (a JSON object or array, a form), or ' +
        'none, gets the 501. The documented success shape {valid, user {id, email, role}} is never returned. A body ' +
        'no route takes (malformed JSON, a bare JSON scalar, a NUL, another content type) is refused before the ' +
        'route, with the 4xx it gets everywhere.',
      tags: ['auth'],
      auth: 'authenticated',
      // Not read: the placeholder answers 501 whatever it is sent ("always", spec §4.1).
      bodyDoc: z.object({ token: z.string().optional() }),
      bodyExample: { token: 'sess_…' },
      responses: { 501: { description: 'Not implemented' } },
    },
    () => {
      throw new HttpError(
        501,
        'NotImplemented',
        'POST /v1/auth/validate is a placeholder that always answers 501; use GET /v1/users/me',
      );
    },
  );
}
