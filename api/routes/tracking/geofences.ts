import Router from '@koa/router';
import { notFound } from '../../../shared/errors';
import { Geofence } from '../../../shared/models/Geofence';
import { geofenceSchema, presentGeofence } from '../../../shared/presenters/geofence';
import { atLeastOne, z, zFinite, zUuid } from '../../../shared/zod';
import { paginate, paginationQuery } from '../../pagination';
import { AppState, defineRoute } from '../../routing';
import type { ApiServices } from '../../services';
import { errors, zLatitude, zLongitude, zName, zText } from './schemas';
import { rowById } from '../../../shared/rowLoader';
import { created, noContent, pageSchema, resource, resourceSchema } from '../../responses';

const idParam = z.object({ id: zUuid() });
const geofenceFields = {
  name: zName(),
  description: zText(),
  latitude: zLatitude(),
  longitude: zLongitude(),
  radius_km: zFinite().positive('must be greater than 0').max(20_037.5, 'must be at most half the Earth circumference (20037.5)'),
  metadata: z
    .record(z.unknown(), { invalid_type_error: 'must be a JSON object' })
    .nullable()
    .optional()
    .openapi({ description: 'Any JSON object; echoed in geofenceEvent pushes' }),
};
const createBody = z.object(geofenceFields);
const patchBody = atLeastOne(
  z.object({
    name: geofenceFields.name.optional(),
    description: geofenceFields.description,
    latitude: geofenceFields.latitude.optional(),
    longitude: geofenceFields.longitude.optional(),
    radius_km: geofenceFields.radius_km.optional(),
    metadata: geofenceFields.metadata,
    is_active: z.boolean().optional(),
  }),
);

/** Spec §4.6: circular geofences, evaluated by the geofence worker for every GPS point. */
export function geofenceRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/geofences',
      summary: 'List geofences by name',
      tags: ['geofences'],
      auth: { permission: 'geofences:read' },
      query: paginationQuery(10),
      responses: { 200: { description: 'Geofences', schema: pageSchema(geofenceSchema) }, ...errors },
    },
    async (ctx, { query }) => {
      ctx.body = await paginate(ctx, Geofence.query().orderByRaw('lower(name), name, id'), query, presentGeofence);
    },
  );

  defineRoute(
    router,
    { method: 'get', path: '/v1/geofences/:id', summary: 'Get a geofence', tags: ['geofences'], auth: { permission: 'geofences:read' }, params: idParam, responses: { 200: { description: 'Geofence', schema: resourceSchema(geofenceSchema) }, ...errors } },
    async (ctx, { params }) => {
      const g = await rowById(Geofence).load(params.id);
      if (!g) throw notFound('geofence');
      ctx.body = resource(ctx, presentGeofence(g));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/geofences',
      summary: 'Create a circular geofence',
      tags: ['geofences'],
      auth: { permission: 'geofences:write' },
      body: createBody,
      responses: { 201: { description: 'Created geofence', schema: resourceSchema(geofenceSchema) }, ...errors },
    },
    async (ctx, { body }) => {
      const g = await Geofence.query().insertAndFetch(body);
      created(ctx, resource(ctx, presentGeofence(g), `/v1/geofences/${g.id}`));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/geofences/:id',
      summary: 'Update a geofence (at least one field)',
      tags: ['geofences'],
      auth: { permission: 'geofences:write' },
      params: idParam,
      body: patchBody,
      responses: { 200: { description: 'Updated geofence', schema: resourceSchema(geofenceSchema) }, ...errors },
    },
    async (ctx, { params, body }) => {
      const g = await rowById(Geofence).load(params.id);
      if (!g) throw notFound('geofence');
      ctx.body = resource(ctx, presentGeofence(await g.$query().patchAndFetch(body)));
    },
  );

  defineRoute(
    router,
    { method: 'delete', path: '/v1/geofences/:id', summary: 'Delete a geofence', tags: ['geofences'], auth: { permission: 'geofences:delete' }, params: idParam, responses: { 204: { description: 'Deleted' }, ...errors } },
    async (ctx, { params }) => {
      const n = await Geofence.query().deleteById(params.id);
      if (!n) throw notFound('geofence');
      noContent(ctx);
    },
  );
}
