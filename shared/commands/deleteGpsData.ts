import type { Knex } from 'knex';
import { forgetLatestGps } from '../caches/gpsLatest';
import type { ServiceContext } from '../context';

/** Which points: those of a device, those older than a time, or both (at least one is set). */
export interface GpsDataFilter {
  deviceId: string | null;
  before: Date | null;
}

/**
 * Bulk deletion of GPS points (spec §4.16 deleteGpsData). Like DELETE /v1/gps/{id}, it never
 * removes points that belong to a trip: those are counted as kept. The latest-position cache of
 * the device is dropped afterwards.
 */
export async function deleteGpsData(
  ctx: Pick<ServiceContext, 'db' | 'redis' | 'config' | 'logger'>,
  filter: GpsDataFilter,
): Promise<{ deleted: number; keptOnTrips: number }> {
  const match = (q: Knex.QueryBuilder) => {
    if (filter.deviceId) q.where('device_id', filter.deviceId);
    if (filter.before) q.where('timestamp', '<', filter.before);
    return q;
  };
  const deleted = await match(ctx.db('gps_points').whereNull('trip_id')).delete();
  const [{ n }] = (await match(ctx.db('gps_points').whereNotNull('trip_id')).count({ n: '*' })) as Array<{
    n: number | string;
  }>;
  await forgetLatestGps(ctx.redis, ctx.config, [filter.deviceId]).catch((err) =>
    ctx.logger.warn({ err: err.message }, 'could not drop the latest GPS cache'),
  );
  return { deleted, keptOnTrips: Number(n) };
}
