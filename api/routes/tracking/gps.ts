import Router from '@koa/router';
import { forgetLatestGps, latestGps } from '../../../shared/caches/gpsLatest';
import { GPS_BATCH_MAX, gpsPointInput, ingestGpsBatch, ingestGpsPoint } from '../../../shared/commands/ingestGps';
import { badRequest, conflict, notFound } from '../../../shared/errors';
import { GpsPoint } from '../../../shared/models/GpsPoint';
import { GPS_POINT_COLUMNS, GpsPointRow, gpsPointSchema, presentGpsPoint } from '../../../shared/presenters/gpsPoint';
import { z, zUuid } from '../../../shared/zod';
import { paginate, paginationQuery } from '../../pagination';
import { AppState, defineRoute } from '../../routing';
import type { ApiServices } from '../../services';
import { errors } from './schemas';
import { rowById } from '../../../shared/rowLoader';
import { created, noContent, pageSchema, resource, resourceSchema } from '../../responses';

const idParam = z.object({ id: zUuid() });
const zDeviceIdQuery = () => z.string().trim().min(1).max(100);
const batchBody = z.object({
  points: z
    .array(z.unknown(), { required_error: 'Required', invalid_type_error: 'must be an array of GPS points' })
    .min(1, 'must contain at least one point')
    .max(GPS_BATCH_MAX, `must contain at most ${GPS_BATCH_MAX} points`)
    .describe('GPS points, each shaped like the body of POST /v1/gps (GpsPointInput)'),
});
const batchResult = z.object({
  data: z.object({
    accepted: z.array(z.object({ index: z.number().int(), id: z.string().uuid() })),
    rejected: z.array(z.object({ index: z.number().int(), errors: z.array(z.object({ field: z.string(), message: z.string() })) })),
  }),
});

/** Spec §4.2 plus batched ingest. */
export function gpsRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/gps',
      summary: 'List GPS points, newest first',
      tags: ['gps'],
      auth: { permission: 'gps:read' },
      query: paginationQuery(10).extend({ device_id: zDeviceIdQuery().optional(), trip_id: zUuid().optional() }),
      responses: { 200: { description: 'GPS points', schema: pageSchema(gpsPointSchema) }, ...errors },
    },
    async (ctx, { query }) => {
      const q = GpsPoint.query().orderBy([
        { column: 'timestamp', order: 'desc' },
        { column: 'created_at', order: 'desc' },
        { column: 'id', order: 'desc' },
      ]);
      if (query.device_id) q.where('device_id', query.device_id);
      if (query.trip_id) q.where('trip_id', query.trip_id);
      ctx.body = await paginate(ctx, q, query, presentGpsPoint);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/gps/current',
      summary: 'The latest GPS point, globally or of one device (cached for 5 minutes, refreshed on every insert)',
      tags: ['gps'],
      auth: { permission: 'gps:read' },
      query: z.object({ device_id: zDeviceIdQuery().optional() }),
      responses: { 200: { description: 'Latest point', schema: resourceSchema(gpsPointSchema) }, ...errors },
    },
    async (ctx, { query }) => {
      const s = ctx.services;
      const point = await latestGps(s.db, s.redis, s.config, query.device_id);
      if (!point) throw notFound('GPS point');
      ctx.body = resource(ctx, point, `/v1/gps/${point.id}`);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/gps/current/devices',
      summary: 'The latest GPS point of every device (bare array, newest first)',
      tags: ['gps'],
      auth: { permission: 'gps:read' },
      responses: { 200: { description: 'One point per device identifier', schema: z.array(gpsPointSchema) }, ...errors },
    },
    async (ctx) => {
      const cols = GPS_POINT_COLUMNS.map((c) => `g."${c}"`).join(', ');
      // Skip scan over the (device_id, timestamp) index: one probe per device, not a full scan.
      const { rows } = await ctx.services.db.raw<{ rows: GpsPointRow[] }>(
        `WITH RECURSIVE devices AS (
           (SELECT device_id FROM gps_points WHERE device_id IS NOT NULL ORDER BY device_id LIMIT 1)
           UNION ALL
           SELECT (SELECT device_id FROM gps_points WHERE device_id > devices.device_id ORDER BY device_id LIMIT 1)
             FROM devices WHERE devices.device_id IS NOT NULL
         )
         SELECT ${cols} FROM devices d
         CROSS JOIN LATERAL (
           SELECT * FROM gps_points p WHERE p.device_id = d.device_id
            ORDER BY p."timestamp" DESC, p.created_at DESC, p.id DESC LIMIT 1
         ) g
         WHERE d.device_id IS NOT NULL
         ORDER BY g."timestamp" DESC, g.device_id`,
      );
      ctx.body = rows.map(presentGpsPoint);
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/gps/batch',
      summary: `Store up to ${GPS_BATCH_MAX} GPS points in one request (buffered trackers)`,
      description:
        'Each point has the shape of POST /v1/gps and is validated on its own. Valid points are stored with one INSERT, published and queued for geofence evaluation; the answer lists the accepted points (index in the request and new id) and the rejected ones (index and errors). 400 when no point is valid.',
      tags: ['gps'],
      auth: { permission: 'gps:write' },
      body: batchBody,
      responses: { 201: { description: 'At least one point stored', schema: batchResult }, ...errors },
    },
    async (ctx, { body }) => {
      const result = await ingestGpsBatch(ctx.services, ctx.state.principal, body.points);
      if (result.accepted.length === 0) {
        const first = result.rejected[0];
        throw badRequest(`points.${first.index}.${first.errors[0].field}: ${first.errors[0].message} (no point was valid)`, { rejected: result.rejected });
      }
      created(ctx, { data: result, _links: { self: ctx.path } });
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/gps/:id',
      summary: 'Get a GPS point',
      tags: ['gps'],
      auth: { permission: 'gps:read' },
      params: idParam,
      responses: { 200: { description: 'GPS point', schema: resourceSchema(gpsPointSchema) }, ...errors },
    },
    async (ctx, { params }) => {
      const point = await rowById(GpsPoint).load(params.id);
      if (!point) throw notFound('GPS point');
      ctx.body = resource(ctx, presentGpsPoint(point));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/gps',
      summary: 'Store a GPS point',
      description:
        'timestamp is integer Unix seconds (answered as ISO 8601). When the caller is an API key linked to a device, the point gets that device_id and the trip_id of the device’s active GPS-logging trip. Rate limited (30 per 60 s by default).',
      tags: ['gps'],
      auth: { permission: 'gps:write' },
      body: gpsPointInput.openapi('GpsPointInput'),
      responses: { 201: { description: 'Stored point', schema: resourceSchema(gpsPointSchema) }, ...errors, 429: { description: 'Rate limit exceeded' } },
    },
    async (ctx, { body }) => {
      const point = await ingestGpsPoint(ctx.services, ctx.state.principal, body);
      created(ctx, resource(ctx, point, `/v1/gps/${point.id}`));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/gps/:id',
      summary: 'Delete a GPS point that belongs to no trip',
      tags: ['gps'],
      auth: { permission: 'gps:delete' },
      params: idParam,
      responses: { 204: { description: 'Deleted' }, ...errors, 409: { description: 'The point is linked to a trip' } },
    },
    async (ctx, { params }) => {
      const s = ctx.services;
      const [deleted] = await s.db('gps_points').where('id', params.id).whereNull('trip_id').delete().returning(['id', 'device_id']);
      if (!deleted) {
        const point = await rowById(GpsPoint).load(params.id);
        if (!point) throw notFound('GPS point');
        throw conflict(`GPS point is linked to trip ${point.trip_id}`);
      }
      // The deleted point may be the cached latest one.
      await forgetLatestGps(s.redis, s.config, [deleted.device_id]).catch((err) => s.logger.warn({ err: err.message }, 'could not drop the latest GPS cache'));
      noContent(ctx);
    },
  );
}
