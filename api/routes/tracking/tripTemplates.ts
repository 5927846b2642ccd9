import Router from '@koa/router';
import { createTripFromTemplate } from '../../../shared/commands/trips';
import { createTripTemplate, deleteTripTemplate, updateTripTemplate } from '../../../shared/commands/tripTemplates';
import { TripTemplate } from '../../../shared/models/TripTemplate';
import { presentTrip, tripSchema } from '../../../shared/presenters/trip';
import { presentTripTemplate, tripTemplateSchema } from '../../../shared/presenters/tripTemplate';
import { findOr404 } from '../../../shared/rowLoader';
import { z, zUuid } from '../../../shared/zod';
import { created, noContent, resource, resourceSchema } from '../../responses';
import { AppState, defineRoute } from '../../routing';
import type { ApiServices } from '../../services';
import { errors, idParam, zName, zTags, zText, zWeight } from './schemas';
import { byName } from '../../../shared/queries/byName';

// Leaves room for the " (from template)" suffix within a trip name's 255 characters.
const templateFields = {
  name: zName(200),
  description: zText(),
  category_id: zUuid().nullable().optional(),
  origin_id: zUuid().nullable().optional(),
  destination_id: zUuid().nullable().optional(),
  device_id: zUuid().nullable().optional(),
  gps_logging_enabled: z.boolean().optional(),
  default_weight_kg: zWeight().nullable().optional(),
  notes: zText(),
  tags: zTags().optional(),
};
const createBody = z.object(templateFields);
const patchBody = z.object({ ...templateFields, name: zName(200).optional() });
const createTripBody = z.object({ weight_kg: zWeight() });

/** Spec §4.8: trip templates (permissions of trips). */
export function tripTemplateRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/trip-templates',
      summary: 'All trip templates by name (bare array)',
      tags: ['trip-templates'],
      auth: { permission: 'trips:read' },
      cacheBy: ['trip_templates'],
      responses: { 200: { description: 'Templates', schema: z.array(tripTemplateSchema) }, ...errors },
    },
    async (ctx) => {
      ctx.body = (await TripTemplate.query(ctx.services.db).orderByRaw(byName())).map(presentTripTemplate);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/trip-templates/:id',
      summary: 'Get a trip template',
      tags: ['trip-templates'],
      auth: { permission: 'trips:read' },
      params: idParam,
      responses: { 200: { description: 'Template', schema: resourceSchema(tripTemplateSchema) }, ...errors },
    },
    async (ctx, { params }) => {
      ctx.body = resource(ctx, presentTripTemplate(await findOr404(TripTemplate, params.id, 'trip template')));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/trip-templates',
      summary: 'Create a trip template',
      tags: ['trip-templates'],
      auth: { permission: 'trips:write' },
      body: createBody,
      responses: { 201: { description: 'Created template', schema: resourceSchema(tripTemplateSchema) }, ...errors },
    },
    async (ctx, { body }) => {
      const t = await createTripTemplate(ctx.services.db, body);
      created(ctx, resource(ctx, presentTripTemplate(t), `/v1/trip-templates/${t.id}`));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/trip-templates/:id',
      summary: 'Update a trip template (only provided fields change)',
      tags: ['trip-templates'],
      auth: { permission: 'trips:write' },
      params: idParam,
      body: patchBody,
      responses: { 200: { description: 'Updated template', schema: resourceSchema(tripTemplateSchema) }, ...errors },
    },
    async (ctx, { params, body }) => {
      const t = await findOr404(TripTemplate, params.id, 'trip template');
      ctx.body = resource(ctx, presentTripTemplate(await updateTripTemplate(ctx.services.db, t, body)));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/trip-templates/:id',
      summary: 'Delete a trip template',
      tags: ['trip-templates'],
      auth: { permission: 'trips:delete' },
      params: idParam,
      responses: { 204: { description: 'Deleted' }, ...errors },
    },
    async (ctx, { params }) => {
      await deleteTripTemplate(ctx.services.db, params.id);
      noContent(ctx);
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/trip-templates/:id/create-trip',
      summary: 'Create a draft trip from a template',
      description:
        "The trip copies the template's values; its name is the template's name followed by ' (from template)'.",
      tags: ['trip-templates'],
      auth: { permission: 'trips:write' },
      params: idParam,
      body: createTripBody,
      responses: { 201: { description: 'Created trip', schema: resourceSchema(tripSchema) }, ...errors },
    },
    async (ctx, { params, body }) => {
      const template = await findOr404(TripTemplate, params.id, 'trip template');
      const trip = await createTripFromTemplate(ctx.services.db, template, body.weight_kg);
      created(ctx, resource(ctx, presentTrip(trip), `/v1/trips/${trip.id}`));
    },
  );
}
