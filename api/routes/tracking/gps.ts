import Router from '@koa/router';
import { latestGps } from '../../../shared/caches/gpsLatest';
import { deleteGpsPoint } from '../../../shared/commands/gpsPoints';
import { ingestGpsBatch, ingestGpsPoint } from '../../../shared/commands/ingestGps';
import { badRequest, notFound } from '../../../shared/errors';
import { GpsPoint } from '../../../shared/models/GpsPoint';
import { gpsBatchResultSchema, gpsPointSchema, presentGpsPoint } from '../../../shared/presenters/gpsPoint';
import { tripPointsOfDevice } from '../../../shared/queries/counters';
import { latestPointPerDevice } from '../../../shared/queries/gpsPoints';
import { findOr404 } from '../../../shared/rowLoader';
import { z, zChars, zUuid } from '../../../shared/zod';
import { paginate, paginationQuery } from '../../pagination';
import { created, noContent, pageSchema, resource, resourceSchema } from '../../responses';
import { errorSchema } from '../../openapiSpec';
import { AppState, defineRoute } from '../../routing';
import type { ApiServices } from '../../services';
import { errors, GPS_BATCH_MAX, gpsBatchBody, gpsBatchPoints, gpsPointInput, idParam } from './schemas';

const zDeviceIdQuery = () => zChars({ trim: true, min: 1, max: 100 });

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
      const q = GpsPoint.query(ctx.services.db).orderBy([
        { column: 'timestamp', order: 'desc' },
        { column: 'created_at', order: 'desc' },
        { column: 'id', order: 'desc' },
      ]);
      if (query.device_id) q.where('device_id', query.device_id);
      if (query.trip_id) q.where('trip_id', query.trip_id);
      // The exact total without counting every match: a device's points alone, its keyed counter;
      // a trip's points alone, the trip's stored count; a trip's points on one device, the trip's
      // count less its points off the device (tripPointsOfDevice). Deep pages are read from the end.
      const counter =
        query.device_id && query.trip_id
          ? tripPointsOfDevice(query.trip_id, query.device_id)
          : query.device_id
            ? { keyed: 'gps_points_by_device' as const, key: query.device_id }
            : query.trip_id
              ? { keyed: 'gps_points_by_trip' as const, key: query.trip_id }
              : undefined;
      ctx.body = await paginate(ctx, q, query, presentGpsPoint, { counter });
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
      // A read over every device, kept while no point is written (one version bump per commit).
      cacheBy: ['gps_points'],
      responses: {
        200: { description: 'One point per device identifier', schema: z.array(gpsPointSchema) },
        ...errors,
      },
    },
    async (ctx) => {
      ctx.body = (await latestPointPerDevice(ctx.services.db)).map(presentGpsPoint);
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/gps/batch',
      summary: `Store up to ${GPS_BATCH_MAX} GPS points in one request (buffered trackers)`,
      description:
        'Each point has the shape of POST /v1/gps and is validated on its own. Valid points are stored with one ' +
        'INSERT, published and queued for geofence evaluation; the answer lists the accepted points (index in the ' +
        'request and new id) and the rejected ones (index and errors); `_links.self` is the GPS list. 400 when no ' +
        'point is valid. Counts as one request of the POST /v1/gps rate limit (30 per 60 s by default, shared ' +
        'with that route).',
      tags: ['gps'],
      auth: { permission: 'gps:write' },
      body: gpsBatchBody,
      // A NUL in one point rejects that point, as any other bad value does (gpsBatchPoints).
      bodyText: 'items',
      responses: {
        201: { description: 'At least one point stored', schema: resourceSchema(gpsBatchResultSchema) },
        ...errors,
        400: {
          description: 'Invalid body, or no point was valid (then `rejected` lists every point and why)',
          schema: errorSchema.extend({ rejected: gpsBatchResultSchema.shape.rejected.optional() }),
        },
      },
    },
    async (ctx, { body }) => {
      const result = await ingestGpsBatch(ctx.services, ctx.state.principal, gpsBatchPoints(body.points));
      if (result.accepted.length === 0) {
        const first = result.rejected[0];
        // Field 'point' is the point itself (not an object, say): named as points.N.
        const { field, message } = first.errors[0];
        const reason = `points.${first.index}${field === 'point' ? '' : `.${field}`}: ${message}`;
        throw badRequest(`${reason} (no point was valid)`, { rejected: result.rejected });
      }
      // The batch is no resource of its own (nothing answers GET /v1/gps/batch): its self link is
      // the GPS list the points were stored in; each accepted point has its own /v1/gps/{id}.
      created(ctx, resource(ctx, result, '/v1/gps'), null);
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
      ctx.body = resource(ctx, presentGpsPoint(await findOr404(GpsPoint, params.id, 'GPS point')));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/gps',
      summary: 'Store a GPS point',
      description:
        'timestamp is integer Unix seconds (answered as ISO 8601). When the caller is an API key linked to a device, ' +
        'the point gets that device_id and the trip_id of the device’s active GPS-logging trip. Rate limited ' +
        '(30 per 60 s by default, shared with POST /v1/gps/batch).',
      tags: ['gps'],
      auth: { permission: 'gps:write' },
      body: gpsPointInput,
      bodyExample: {
        latitude: 52.52,
        longitude: 13.405,
        timestamp: 1795000000,
        speed_kmh: 36,
        speed_mps: 10,
        speed_mph: 22.37,
        speed_knots: 19.44,
      },
      responses: {
        201: { description: 'Stored point', schema: resourceSchema(gpsPointSchema) },
        ...errors,
        429: { description: 'Rate limit exceeded' },
      },
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
      await deleteGpsPoint(ctx.services, params.id);
      noContent(ctx);
    },
  );
}
