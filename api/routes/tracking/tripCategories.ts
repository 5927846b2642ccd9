import Router from '@koa/router';
import { deleteTripCategory, saveTripCategory } from '../../../shared/commands/tripCategories';
import { TripCategory } from '../../../shared/models/TripCategory';
import { presentTripCategory, tripCategorySchema } from '../../../shared/presenters/tripCategory';
import { findOr404 } from '../../../shared/rowLoader';
import { atLeastOne, z, zUuid } from '../../../shared/zod';
import { created, noContent, resource, resourceSchema } from '../../responses';
import { AppState, defineRoute } from '../../routing';
import type { ApiServices } from '../../services';
import { errors, idParam, zName, zText } from './schemas';
import { byName } from '../../../shared/queries/byName';

const categoryFields = {
  parent_id: zUuid().nullable().optional(),
  name: zName(),
  description: zText(),
  color: z
    .string()
    .regex(/^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/, 'must be a hex colour like #1a2b3c')
    .nullable()
    .optional(),
  sort_order: z
    .number({ invalid_type_error: 'must be an integer' })
    .int('must be an integer')
    .min(-1_000_000)
    .max(1_000_000)
    .optional(),
};
const createBody = z.object(categoryFields);
const patchBody = atLeastOne(
  z.object({
    ...categoryFields,
    name: zName().optional(),
    is_active: z.boolean().optional(),
    parent_id: categoryFields.parent_id.openapi({
      description: 'Move under another category (null: top level); never under itself or a descendant',
    }),
  }),
);

/** Spec §4.7: a hierarchy of trip categories. */
export function tripCategoryRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/trip-categories',
      summary: 'All trip categories by sort_order then name (bare array)',
      tags: ['trip-categories'],
      auth: { permission: 'trip_categories:read' },
      cacheBy: ['trip_categories'],
      responses: { 200: { description: 'Categories', schema: z.array(tripCategorySchema) }, ...errors },
    },
    async (ctx) => {
      ctx.body = (await TripCategory.query(ctx.services.db).orderByRaw(`sort_order, ${byName()}`)).map(
        presentTripCategory,
      );
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/trip-categories/:id',
      summary: 'Get a trip category',
      tags: ['trip-categories'],
      auth: { permission: 'trip_categories:read' },
      params: idParam,
      responses: { 200: { description: 'Category', schema: resourceSchema(tripCategorySchema) }, ...errors },
    },
    async (ctx, { params }) => {
      ctx.body = resource(ctx, presentTripCategory(await findOr404(TripCategory, params.id, 'trip category')));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/trip-categories',
      summary: 'Create a trip category',
      tags: ['trip-categories'],
      auth: { permission: 'trip_categories:write' },
      body: createBody,
      responses: { 201: { description: 'Created category', schema: resourceSchema(tripCategorySchema) }, ...errors },
    },
    async (ctx, { body }) => {
      const c = await saveTripCategory(ctx.services.db, null, body);
      created(ctx, resource(ctx, presentTripCategory(c), `/v1/trip-categories/${c.id}`));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/trip-categories/:id',
      summary: 'Update a trip category (at least one field)',
      tags: ['trip-categories'],
      auth: { permission: 'trip_categories:write' },
      params: idParam,
      body: patchBody,
      responses: { 200: { description: 'Updated category', schema: resourceSchema(tripCategorySchema) }, ...errors },
    },
    async (ctx, { params, body }) => {
      ctx.body = resource(ctx, presentTripCategory(await saveTripCategory(ctx.services.db, params.id, body)));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/trip-categories/:id',
      summary: 'Delete a trip category (its children move to the top level)',
      tags: ['trip-categories'],
      auth: { permission: 'trip_categories:delete' },
      params: idParam,
      responses: { 204: { description: 'Deleted' }, ...errors },
    },
    async (ctx, { params }) => {
      await deleteTripCategory(ctx.services.db, params.id);
      noContent(ctx);
    },
  );
}
