import type { Knex } from 'knex';
import type Redis from 'ioredis';
import { forgetLatestGps } from '../caches/gpsLatest';
import type { Config } from '../config';
import { badRequest, conflict } from '../errors';
import type { Logger } from '../logger';
import { GpsPoint } from '../models/GpsPoint';
import { deferToOutbox, type OutboxRelay } from '../outbox';
import { findOr404 } from '../rowLoader';

/** What deleting GPS points needs: the database, the latest-point cache to drop, the relay to wake. */
export interface GpsDeleteDeps {
  db: Knex;
  redis: Redis;
  config: Pick<Config, 'redisPrefix'>;
  logger: Logger;
  outbox?: Pick<OutboxRelay, 'wake'>;
}

/**
 * Drops cached latest points that a delete may have removed or changed. When Redis does not take
 * the drop (down or hung), the outbox drops them once it answers: a Redis that hung keeps its
 * keys, and would otherwise serve the deleted point as the current position until they expire.
 */
export async function forgetDeletedGps(deps: GpsDeleteDeps, deviceIds: Array<string | null>): Promise<void> {
  try {
    await forgetLatestGps(deps.redis, deps.config, deviceIds);
  } catch (err) {
    await deferToOutbox(deps, 'gpsLatestForget', { deviceIds }, err, 'drop the latest GPS cache');
  }
}

/** Deletes a GPS point that belongs to no trip: 404 when there is none, 409 when it is on a trip. */
export async function deleteGpsPoint(deps: GpsDeleteDeps, id: string): Promise<void> {
  const [deleted] = await deps
    .db('gps_points')
    .where('id', id)
    .whereNull('trip_id')
    .delete()
    .returning(['id', 'device_id']);
  if (!deleted) {
    const point = await findOr404(GpsPoint, id, 'GPS point');
    throw conflict(`GPS point is linked to trip ${point.trip_id}`);
  }
  // The deleted point may be the cached latest one.
  await forgetDeletedGps(deps, [deleted.device_id]);
}

/**
 * Deletes the GPS points of a device and/or older than `before` that belong to no trip (GraphQL
 * deleteGpsData); the matching points on trips are kept and counted. Needs at least one filter.
 */
export async function deleteGpsData(
  deps: GpsDeleteDeps,
  filter: { deviceId?: string | null; before?: Date | null },
): Promise<{ deleted: number; keptOnTrips: number }> {
  // A missing filter is refused here too: no caller may turn "no filter" into "every point".
  if (filter.deviceId == null && filter.before == null) throw badRequest('deviceId or before is required');
  const match = (q: Knex.QueryBuilder) => {
    if (filter.deviceId != null) q.where('device_id', filter.deviceId);
    if (filter.before != null) q.where('timestamp', '<', filter.before);
    return q;
  };
  // The devices whose points went, each once: their cached latest point may be one of them (a
  // delete by date alone names no device, and every one it touched must be forgotten).
  const removed = match(deps.db('gps_points').whereNull('trip_id')).delete().returning('device_id');
  const {
    rows: [{ deleted, devices }],
  } = await deps.db.raw<{ rows: Array<{ deleted: string; devices: Array<string | null> }> }>(
    'WITH d AS (?) SELECT count(*) AS deleted, coalesce(array_agg(DISTINCT device_id), ?::text[]) AS devices FROM d',
    [removed, []],
  );
  const kept = match(deps.db('gps_points').whereNotNull('trip_id')).count({ n: '*' });
  const [{ n }] = (await kept) as Array<{ n: number | string }>;
  await forgetDeletedGps(deps, [filter.deviceId ?? null, ...devices]);
  return { deleted: Number(deleted), keptOnTrips: Number(n) };
}
