import Router from '@koa/router';
import { createGeofence, deleteGeofence, updateGeofence } from '../../../shared/commands/geofences';
import { Device } from '../../../shared/models/Device';
import { Geofence } from '../../../shared/models/Geofence';
import { GeofenceEvent } from '../../../shared/models/GeofenceEvent';
import { geofenceEventSchema, presentGeofenceEvent } from '../../../shared/presenters/geofenceEvent';
import { geofenceSchema, presentGeofence } from '../../../shared/presenters/geofence';
import { findOr404, pagesOf } from '../../../shared/rowLoader';
import { atLeastOne, z, zFinite, zJsonAtMost } from '../../../shared/zod';
import { paginate, paginatedBody, paginationQuery } from '../../pagination';
import { created, noContent, pageSchema, resource, resourceSchema } from '../../responses';
import { AppState, defineRoute } from '../../routing';
import type { ApiServices } from '../../services';
import { errors, idParam, zLatitude, zLongitude, zName, zText } from './schemas';
import { byName } from '../../../shared/queries/byName';

/**
 * Largest metadata of a fence, as JSON: it is copied into every geofenceEvent push (twice, and into
 * the kept transitions when recording fails), into every geofence worker's fence index and into
 * every list page, so one fence's metadata may not be megabytes.
 */
const MAX_METADATA_BYTES = 16 * 1024;
const geofenceFields = {
  name: zName(),
  description: zText(),
  latitude: zLatitude(),
  longitude: zLongitude(),
  radius_km: zFinite()
    .positive('must be greater than 0')
    .max(20_037.5, 'must be at most half the Earth circumference (20037.5)'),
  metadata: zJsonAtMost(
    z.record(z.unknown(), { invalid_type_error: 'must be a JSON object' }).nullable().optional(),
    MAX_METADATA_BYTES,
  ).openapi({
    description: `Any JSON object of at most ${MAX_METADATA_BYTES / 1024} KiB as JSON; echoed in geofenceEvent pushes`,
  }),
  min_dwell_seconds: z
    .number({ invalid_type_error: 'must be an integer' })
    .int('must be an integer')
    .min(0, 'must be at least 0')
    .max(86400, 'must be at most 86400')
    .optional()
    .openapi({ description: 'A state change counts only after it held this long (GPS time); default 0' }),
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
    min_dwell_seconds: geofenceFields.min_dwell_seconds,
    is_active: z.boolean().optional(),
  }),
);

/** Geofence events newest first, a page per geofence or device (pagesOf). */
const EVENT_ORDER = [
  ['occurred_at', 'desc'],
  ['id', 'desc'],
] as const;
// Exact totals from keyed row counters: counting a fence's 100,000 events cost every page 40-100 ms.
const fenceEvents = pagesOf(GeofenceEvent, 'geofence_id', 'uuid', EVENT_ORDER, { counter: 'geofence_events_by_fence' });
const deviceEvents = pagesOf(GeofenceEvent, 'device_id', 'text', EVENT_ORDER, { counter: 'geofence_events_by_device' });

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
      cacheBy: ['geofences'],
      query: paginationQuery(10),
      responses: { 200: { description: 'Geofences', schema: pageSchema(geofenceSchema) }, ...errors },
    },
    async (ctx, { query }) => {
      ctx.body = await paginate(ctx, Geofence.query(ctx.services.db).orderByRaw(byName()), query, presentGeofence);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/geofences/:id',
      summary: 'Get a geofence',
      tags: ['geofences'],
      auth: { permission: 'geofences:read' },
      params: idParam,
      responses: { 200: { description: 'Geofence', schema: resourceSchema(geofenceSchema) }, ...errors },
    },
    async (ctx, { params }) => {
      ctx.body = resource(ctx, presentGeofence(await findOr404(Geofence, params.id, 'geofence')));
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
      const g = await createGeofence(ctx.services.db, body);
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
      const g = await findOr404(Geofence, params.id, 'geofence');
      ctx.body = resource(ctx, presentGeofence(await updateGeofence(ctx.services.db, g, body)));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/geofences/:id',
      summary: 'Delete a geofence',
      tags: ['geofences'],
      auth: { permission: 'geofences:delete' },
      params: idParam,
      responses: { 204: { description: 'Deleted' }, ...errors },
    },
    async (ctx, { params }) => {
      await deleteGeofence(ctx.services.db, params.id);
      noContent(ctx);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/geofences/:id/events',
      summary: "A geofence's enter/exit history, newest first",
      tags: ['geofences'],
      auth: { permission: 'geofences:read' },
      params: idParam,
      query: paginationQuery(20),
      responses: { 200: { description: 'Geofence events', schema: pageSchema(geofenceEventSchema) }, ...errors },
    },
    async (ctx, { params, query }) => {
      // The geofence (404) and the page in the same turn's batches: one round trip; the pages of
      // every geofence asked for in the turn are one statement.
      const [, { results, total }] = await Promise.all([
        findOr404(Geofence, params.id, 'geofence'),
        fenceEvents.load(ctx.services.db, params.id.toLowerCase(), query.limit, (query.page - 1) * query.limit),
      ]);
      ctx.body = paginatedBody(ctx, results.map(presentGeofenceEvent), total, query);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/devices/:id/geofence-events',
      summary: "A device's geofence enters and exits, newest first",
      tags: ['geofences'],
      auth: { permission: 'geofences:read' },
      params: idParam,
      query: paginationQuery(20),
      responses: { 200: { description: 'Geofence events', schema: pageSchema(geofenceEventSchema) }, ...errors },
    },
    async (ctx, { params, query }) => {
      // The device (404) and the page in the same turn's batches: one round trip; the pages of
      // every device asked for in the turn are one statement.
      const [, { results, total }] = await Promise.all([
        findOr404(Device, params.id, 'device'),
        deviceEvents.load(ctx.services.db, params.id.toLowerCase(), query.limit, (query.page - 1) * query.limit),
      ]);
      ctx.body = paginatedBody(ctx, results.map(presentGeofenceEvent), total, query);
    },
  );
}
