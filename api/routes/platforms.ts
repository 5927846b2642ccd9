import Router from '@koa/router';
import { setPlatformEnabled } from '../../shared/commands/platforms';
import { findPlatform } from '../../shared/queries/users';
import { notFound } from '../../shared/errors';
import { Platform } from '../../shared/models/Platform';
import {
  platformSchema,
  platformSwitchSchema,
  presentPlatform,
  presentPlatformSwitch,
} from '../../shared/presenters/platform';
import { z, zChars } from '../../shared/zod';
import { listSchema, resource, resourceSchema } from '../responses';
import { defineRoute, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';
import { byName } from '../../shared/queries/byName';

const idOrSlug = z.object({ id_or_slug: zChars({ min: 1, max: 100 }) });
const platformList = { 200: { description: 'Platforms', schema: listSchema(platformSchema) } };

/** Sign-in platforms (spec §4.17): public lists and lookup, enable/disable with settings:write. */
export function platformRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/platforms',
      summary: 'List sign-in platforms',
      tags: ['platforms'],
      auth: 'public',
      cacheBy: ['platforms'],
      responses: platformList,
    },
    async (ctx) => {
      ctx.body = resource(ctx, (await Platform.query(ctx.services.db).orderByRaw(byName())).map(presentPlatform));
    },
  );

  // Registered before /:id_or_slug, so `enabled` is never read as a slug.
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/platforms/enabled',
      summary: 'List enabled sign-in platforms',
      tags: ['platforms'],
      auth: 'public',
      cacheBy: ['platforms'],
      responses: platformList,
    },
    async (ctx) => {
      ctx.body = resource(
        ctx,
        (await Platform.query(ctx.services.db).where('enabled', true).orderByRaw(byName())).map(presentPlatform),
      );
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/platforms/:id_or_slug',
      summary: 'Get a platform by id or slug',
      tags: ['platforms'],
      auth: 'public',
      cacheBy: ['platforms'],
      params: idOrSlug,
      responses: {
        200: { description: 'Platform', schema: resourceSchema(platformSchema) },
        404: { description: 'No such platform' },
      },
    },
    async (ctx, { params }) => {
      const p = await findPlatform(ctx.services.db, params.id_or_slug);
      if (!p) throw notFound('platform');
      ctx.body = resource(ctx, presentPlatform(p), `/v1/platforms/${p.slug}`);
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/platforms/:id_or_slug/enabled',
      summary: 'Enable or disable sign-in through a platform',
      description:
        'A disabled platform refuses new sign-ins and registrations through it; users keep access through their other linked platforms.',
      tags: ['platforms'],
      auth: { permission: 'settings:write' },
      params: idOrSlug,
      body: z.object({
        enabled: z.boolean({ required_error: 'is required', invalid_type_error: 'must be a boolean' }),
      }),
      responses: {
        200: { description: 'The platform', schema: resourceSchema(platformSwitchSchema) },
        404: { description: 'No such platform' },
      },
    },
    async (ctx, { params, body }) => {
      const p = await findPlatform(ctx.services.db, params.id_or_slug);
      if (!p) throw notFound('platform');
      const updated = await setPlatformEnabled(ctx.services, p, body.enabled, requestAttribution(ctx));
      ctx.body = resource(ctx, presentPlatformSwitch(updated), `/v1/platforms/${updated.slug}`);
    },
  );
}
