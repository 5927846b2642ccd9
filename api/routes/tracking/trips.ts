import Router from '@koa/router';
import { buildTripGpxYielding, GPX_CONTENT_TYPE } from '../../../shared/domain/gpx';
import { tripTrackOf } from '../../../shared/caches/tableVersions';
import { createTrip, deleteTrip, updateTrip } from '../../../shared/commands/trips';
import { TRIP_STATUSES } from '../../../shared/domain/tripStatus';
import { GpsPoint } from '../../../shared/models/GpsPoint';
import { Trip } from '../../../shared/models/Trip';
import { TripStatusHistory } from '../../../shared/models/TripStatusHistory';
import { actingUserId } from '../../../shared/policies';
import { gpsPointSchema, presentGpsPoint } from '../../../shared/presenters/gpsPoint';
import { presentTrip, presentTripHistory, tripHistorySchema, tripSchema } from '../../../shared/presenters/trip';
import { tripStats, tripTrack } from '../../../shared/queries/gpsPoints';
import { findOr404, pagesOf } from '../../../shared/rowLoader';
import { z, zUuid } from '../../../shared/zod';
import { paginate, paginatedBody, paginationQuery } from '../../pagination';
import { created, noContent, pageSchema, resource, resourceSchema } from '../../responses';
import { AppState, defineRoute } from '../../routing';
import type { ApiServices } from '../../services';
import { errors, idParam, zLatitude, zLongitude, zName, zTags, zText, zWeight } from './schemas';

const zStatus = () =>
  z.enum(TRIP_STATUSES, { errorMap: () => ({ message: `must be one of ${TRIP_STATUSES.join(', ')}` }) });
const tripFields = {
  name: zName(),
  description: zText(),
  gps_logging_enabled: z.boolean().optional(),
  device_id: zUuid().nullable().optional(),
  category_id: zUuid().nullable().optional(),
  origin_id: zUuid().nullable().optional(),
  destination_id: zUuid().nullable().optional(),
  weight_kg: zWeight().nullable().optional(),
  notes: zText(),
  tags: zTags().optional(),
};
const createBody = z.object(tripFields);
const patchBody = z.object({
  ...tripFields,
  name: zName().optional(),
  status: zStatus().optional().openapi({
    description: 'draft→active, active→paused, paused→active, active|paused→completed; anything else is 400',
  }),
  start_latitude: zLatitude().nullable().optional(),
  start_longitude: zLongitude().nullable().optional(),
  end_latitude: zLatitude().nullable().optional(),
  end_longitude: zLongitude().nullable().optional(),
  latitude: zLatitude().nullable().optional().openapi({
    description: 'Where the status change happened (history entry); defaults to the start/end coordinates sent',
  }),
  longitude: zLongitude().nullable().optional().openapi({ description: 'See latitude' }),
});

/** A trip's points in track order, a page per trip (pagesOf), as plain rows: presentGpsPoint reads rows. */
const tripPoints = pagesOf(
  GpsPoint,
  'trip_id',
  'uuid',
  [
    ['timestamp', 'asc'],
    ['created_at', 'asc'],
    ['id', 'asc'],
  ],
  // The exact total is the trip's stored point count, not a count of its track on every page.
  { plain: true, counter: 'gps_points_by_trip' },
);

/** Spec §4.4 and §3, plus GPX export. */
export function tripRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/trips',
      summary: 'List trips, newest first',
      tags: ['trips'],
      auth: { permission: 'trips:read' },
      cacheBy: ['trips'],
      query: paginationQuery(20).extend({ status: zStatus().optional() }),
      responses: { 200: { description: 'Trips', schema: pageSchema(tripSchema) }, ...errors },
    },
    async (ctx, { query }) => {
      const q = Trip.query(ctx.services.db).orderBy([
        { column: 'created_at', order: 'desc' },
        { column: 'id', order: 'desc' },
      ]);
      if (query.status) q.where('status', query.status);
      // One status alone: the exact total is that status's keyed counter, not a count per page.
      const counter = query.status ? { keyed: 'trips_by_status' as const, key: query.status } : undefined;
      ctx.body = await paginate(ctx, q, query, (t) => presentTrip(t), { counter });
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/trips/:id',
      summary: 'Get a trip with its distance and duration',
      tags: ['trips'],
      auth: { permission: 'trips:read' },
      cacheBy: ['trips', tripTrackOf('id')],
      params: idParam,
      responses: {
        200: { description: 'Trip with distance_km and duration_seconds', schema: resourceSchema(tripSchema) },
        ...errors,
      },
    },
    async (ctx, { params }) => {
      // Both reads in the same turn's batches: one round trip, not two.
      const [trip, stats] = await Promise.all([
        findOr404(Trip, params.id, 'trip'),
        tripStats(ctx.services.db, params.id),
      ]);
      ctx.body = resource(ctx, presentTrip(trip, stats));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/trips',
      summary: 'Create a trip (always draft)',
      tags: ['trips'],
      auth: { permission: 'trips:write' },
      body: createBody,
      bodyExample: { name: 'Berlin to Hamburg', description: 'Weekly delivery', gps_logging_enabled: true },
      responses: { 201: { description: 'Created trip', schema: resourceSchema(tripSchema) }, ...errors },
    },
    async (ctx, { body }) => {
      const trip = await createTrip(ctx.services.db, body);
      created(ctx, resource(ctx, presentTrip(trip), `/v1/trips/${trip.id}`));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/trips/:id',
      summary: 'Update a trip or change its status',
      description:
        'Only provided fields change. A status change follows spec §3 (started_at/ended_at are set automatically) and adds a history entry with the acting user and optional position.',
      tags: ['trips'],
      auth: { permission: 'trips:write' },
      params: idParam,
      body: patchBody,
      responses: {
        200: { description: 'Updated trip', schema: resourceSchema(tripSchema) },
        ...errors,
        409: { description: 'Another active GPS-logging trip runs on the same device' },
      },
    },
    async (ctx, { params, body }) => {
      const trip = await updateTrip(ctx.services, params.id, body, actingUserId(ctx.state.principal));
      ctx.body = resource(ctx, presentTrip(trip));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/trips/:id',
      summary: 'Delete a draft or completed trip (its GPS points stay, without trip)',
      tags: ['trips'],
      auth: { permission: 'trips:delete' },
      params: idParam,
      responses: { 204: { description: 'Deleted' }, ...errors, 409: { description: 'Trip is active or paused' } },
    },
    async (ctx, { params }) => {
      await deleteTrip(ctx.services, params.id);
      noContent(ctx);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/trips/:id/gps',
      summary: "A trip's GPS points, oldest first",
      tags: ['trips'],
      auth: { permission: 'trips:read' },
      cacheBy: ['trips', tripTrackOf('id')],
      params: idParam,
      query: paginationQuery(10),
      responses: { 200: { description: 'GPS points', schema: pageSchema(gpsPointSchema) }, ...errors },
    },
    async (ctx, { params, query }) => {
      // The trip (404) and the page in the same turn's batches: one round trip; the pages of every
      // trip asked for in the turn are one statement.
      const [, { results, total }] = await Promise.all([
        findOr404(Trip, params.id, 'trip'),
        tripPoints.load(ctx.services.db, params.id, query.limit, (query.page - 1) * query.limit),
      ]);
      ctx.body = paginatedBody(ctx, results.map(presentGpsPoint), total, query);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/trips/:id/history',
      summary: "A trip's status changes, oldest first (bare array)",
      tags: ['trips'],
      auth: { permission: 'trips:read' },
      cacheBy: ['trips', 'trip_status_history'],
      params: idParam,
      responses: { 200: { description: 'History entries', schema: z.array(tripHistorySchema) }, ...errors },
    },
    async (ctx, { params }) => {
      const trip = await findOr404(Trip, params.id, 'trip');
      const rows = await TripStatusHistory.query(ctx.services.db)
        .where('trip_id', trip.id)
        .orderBy([{ column: 'changed_at' }, { column: 'id' }]);
      ctx.body = rows.map(presentTripHistory);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/trips/:id/gpx',
      summary: "The trip's track as a GPX 1.1 file",
      description:
        'One track segment with every point in timestamp order; distance_km and duration_seconds are in the metadata extensions. ' +
        'The metadata time is when this version of the document was made: it is made again after any change to the trip or its points.',
      tags: ['trips'],
      auth: { permission: 'trips:read' },
      cacheBy: ['trips', tripTrackOf('id')],
      params: idParam,
      responses: {
        200: { description: 'GPX 1.1 document', schema: z.string(), contentType: GPX_CONTENT_TYPE },
        ...errors,
      },
    },
    async (ctx, { params }) => {
      const trip = await findOr404(Trip, params.id, 'trip');
      const [points, stats] = await Promise.all([
        tripTrack(ctx.services.db, trip.id),
        tripStats(ctx.services.db, trip.id),
      ]);
      ctx.type = GPX_CONTENT_TYPE;
      ctx.set('Content-Disposition', `attachment; filename="trip-${trip.id}.gpx"`);
      ctx.body = await buildTripGpxYielding(trip, points, stats);
    },
  );
}
