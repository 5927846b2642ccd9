import Router from '@koa/router';
import { latestGps } from '../../shared/caches/gpsLatest';
import { pegelStations, StationsAnswer } from '../../shared/caches/pegelStations';
import { badRequest, HttpError, notFound, serviceUnavailable } from '../../shared/errors';
import { PegelQuery, PegelUnavailableError } from '../../shared/pegel/client';
import { nearestStation, onWater } from '../../shared/pegel/stations';
import {
  nearestStationSchema,
  presentNearestStation,
  presentWaterLevelStation,
  waterLevelStationSchema,
} from '../../shared/presenters/waterLevelStation';
import { z, zChars, zQueryDecimal } from '../../shared/zod';
import { reusable } from '../compression';
import { resource, resourceSchema } from '../responses';
import { AppContext, AppState, defineRoute } from '../routing';
import type { ApiServices } from '../services';

const zQueryNumber = (min: number, max: number) =>
  zQueryDecimal((n) => n.min(min, `must be between ${min} and ${max}`).max(max, `must be between ${min} and ${max}`));
const zWater = () =>
  zChars({ trim: true, min: 1, max: 100 }).openapi({
    description: 'Water body short name, e.g. RHEIN (case-insensitive)',
  });
const errors = {
  400: { description: 'Invalid input' },
  401: { description: 'Authentication required' },
  403: { description: 'Insufficient permissions' },
  503: { description: 'Water-level provider not configured, failing or too slow (and nothing cached)' },
};

/** The serialised answer of GET /v1/pegel/stations, per (shared) station list. */
const listBytes = new WeakMap<readonly object[], Buffer>();

/** Runs a lookup through the shared cache; upstream trouble becomes a 503, a stale answer is marked. */
async function stations(ctx: AppContext, q: PegelQuery): Promise<StationsAnswer> {
  const s = ctx.services;
  if (!s.config.pegelApiUrl) throw serviceUnavailable('water-level provider not configured');
  let answer: StationsAnswer;
  try {
    answer = await pegelStations(s, q);
  } catch (err) {
    if (err instanceof PegelUnavailableError) {
      s.logger.warn({ err: err.message }, 'water-level provider unavailable');
      throw serviceUnavailable('water-level provider unavailable; try again shortly');
    }
    throw err;
  }
  ctx.set('X-Cache', answer.cache);
  if (answer.cache === 'stale') ctx.set('Warning', '110 - "Response is Stale"');
  return answer;
}

/** Spec §4.10: water-level stations from PEGELONLINE (PEGEL_API_URL), cached in Redis. */
export function pegelRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/pegel/stations',
      summary: 'Water-level stations, optionally on one water (bare array)',
      tags: ['pegel'],
      auth: { permission: 'pegel:read' },
      query: z.object({ water: zWater().optional() }),
      responses: { 200: { description: 'Stations', schema: z.array(waterLevelStationSchema) }, ...errors },
    },
    async (ctx, { query }) => {
      const answer = await stations(ctx, { water: query.water });
      const list = onWater(answer.stations, query.water);
      // The list is shared while its answer is current (shared/caches/pegelStations.ts): so are its bytes.
      let bytes = listBytes.get(list);
      if (!bytes)
        listBytes.set(list, (bytes = reusable(Buffer.from(JSON.stringify(list.map(presentWaterLevelStation))))));
      ctx.type = 'application/json';
      ctx.body = bytes;
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/pegel/nearest',
      summary: 'The station nearest to a position (lat/lon, else the latest GPS point)',
      description:
        'Optionally only stations on `water` and within `radius` km. 404 when no station qualifies or there is no position to search from.',
      tags: ['pegel'],
      auth: { permission: 'pegel:read' },
      query: z.object({
        lat: zQueryNumber(-90, 90).optional(),
        lon: zQueryNumber(-180, 180).optional(),
        water: zWater().optional(),
        radius: zQueryDecimal((n) => n.positive('must be > 0').max(2000, 'must be at most 2000')).optional(),
      }),
      responses: {
        200: { description: 'Nearest station', schema: resourceSchema(nearestStationSchema) },
        404: { description: 'No station qualifies, or no position' },
        ...errors,
      },
    },
    async (ctx, { query }) => {
      const s = ctx.services;
      if (!s.config.pegelApiUrl) throw serviceUnavailable('water-level provider not configured');
      if ((query.lat === undefined) !== (query.lon === undefined))
        throw badRequest(
          `${query.lat === undefined ? 'lat' : 'lon'}: is required with ${query.lat === undefined ? 'lon' : 'lat'}`,
        );
      let lat = query.lat;
      let lon = query.lon;
      if (lat === undefined || lon === undefined) {
        const point = await latestGps(s.db, s.redis, s.config);
        if (!point) throw new HttpError(404, 'NotFound', 'no position: pass lat and lon, or record a GPS point first');
        [lat, lon] = [point.latitude, point.longitude];
      }
      // With a radius upstream filters the circle; without one the full (shared, cached) list is searched.
      const q: PegelQuery =
        query.radius !== undefined
          ? { water: query.water, latitude: lat, longitude: lon, radius: query.radius }
          : { water: query.water };
      const answer = await stations(ctx, q);
      const best = nearestStation(onWater(answer.stations, query.water), lat, lon, query.radius);
      if (!best) throw notFound('water-level station matching the search');
      ctx.body = resource(ctx, presentNearestStation(best));
    },
  );
}
