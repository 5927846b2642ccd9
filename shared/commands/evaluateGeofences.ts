import type { Knex } from 'knex';
import type Redis from 'ioredis';
import type { Config } from '../config';
import type { EventBus, ServerPush } from '../events';
import { haversineKm } from '../geo';
import type { Logger } from '../logger';
import { redisKey, RedisKeys } from '../redis';
import { gpsSortKey } from '../caches/gpsLatest';

export type GeofenceEventData = Extract<ServerPush, { type: 'geofenceEvent' }>['data'];

/** Inside/outside state of a (device, geofence) pair is forgotten after a week without points. */
const STATE_TTL_SECONDS = 7 * 24 * 3600;
const SORT_KEY_LENGTH = 15 + 15 + 36;

/*
 * One state per (device, geofence): `<sort key of the last point applied><0|1>`. Points apply in
 * database order only (a late, older point is ignored), so concurrent jobs and buffered batches
 * cannot flip the state backwards. Without a previous state a point inside counts as an entry.
 * Returns the 1-based indexes of the entries that changed the state.
 */
const TRANSITION_SCRIPT = `
local ttl = tonumber(ARGV[1])
local out = {}
for i, k in ipairs(KEYS) do
  local sort = ARGV[2 * i]
  local inside = ARGV[2 * i + 1]
  local cur = redis.call('GET', k)
  if not cur then
    redis.call('SET', k, sort .. inside, 'EX', ttl)
    if inside == '1' then out[#out + 1] = i end
  elseif sort > string.sub(cur, 1, ${SORT_KEY_LENGTH}) then
    redis.call('SET', k, sort .. inside, 'EX', ttl)
    if string.sub(cur, ${SORT_KEY_LENGTH + 1}, ${SORT_KEY_LENGTH + 1}) ~= inside then out[#out + 1] = i end
  end
end
return out`;

type TransitionRedis = Redis & {
  geofenceTransitions(numKeys: number, ...args: Array<string | number>): Promise<number[]>;
};
const prepared = new WeakSet<Redis>();
function scripts(redis: Redis): TransitionRedis {
  if (!prepared.has(redis)) {
    redis.defineCommand('geofenceTransitions', { lua: TRANSITION_SCRIPT });
    prepared.add(redis);
  }
  return redis as TransitionRedis;
}

interface FenceRow {
  id: string;
  name: string;
  latitude: number;
  longitude: number;
  radius_km: number;
  metadata: Record<string, unknown> | null;
}

/**
 * Evaluates the given GPS points against every active geofence (haversine distance against
 * radius_km), records the inside/outside state per (device, geofence) in Redis and publishes a
 * `geofenceEvent` on `geofence` and `geofence:<id>` for each enter or exit. Points without a device
 * identifier share one anonymous track. Honours the `geofence.evaluation_enabled` system config.
 */
export async function evaluateGeofences(
  deps: { db: Knex; redis: Redis; bus: EventBus; config: Pick<Config, 'redisPrefix'>; logger: Logger },
  gpsPointIds: string[],
): Promise<GeofenceEventData[]> {
  if (gpsPointIds.length === 0) return [];
  const { rows: fences } = await deps.db.raw<{ rows: FenceRow[] }>(
    `SELECT id, name, latitude, longitude, radius_km, metadata FROM geofences
      WHERE is_active AND COALESCE((SELECT value FROM system_config WHERE key = 'geofence.evaluation_enabled'), 'true'::jsonb) <> 'false'::jsonb`,
  );
  if (fences.length === 0) return [];
  const points = await deps
    .db('gps_points')
    .whereIn('id', gpsPointIds)
    .select('id', 'device_id', 'latitude', 'longitude', 'timestamp', 'created_at')
    .orderBy([{ column: 'timestamp' }, { column: 'created_at' }, { column: 'id' }]);
  if (points.length === 0) return [];

  const keys: string[] = [];
  const args: string[] = [];
  const entries: GeofenceEventData[] = [];
  for (const p of points) {
    const sort = gpsSortKey(p);
    for (const f of fences) {
      const distance = haversineKm(p.latitude, p.longitude, f.latitude, f.longitude);
      const inside = distance <= f.radius_km;
      keys.push(redisKey(deps.config, RedisKeys.geofenceState(p.device_id ?? '-', f.id)));
      args.push(sort, inside ? '1' : '0');
      entries.push({
        geofence_id: f.id,
        geofence_name: f.name,
        event: inside ? 'enter' : 'exit',
        device_id: p.device_id,
        distance_km: Math.round(distance * 1000) / 1000,
        metadata: f.metadata ?? null,
      });
    }
  }
  const changed = await scripts(deps.redis).geofenceTransitions(keys.length, ...keys, STATE_TTL_SECONDS, ...args);
  const events = changed.map((i) => entries[i - 1]);
  for (const data of events) {
    const push: ServerPush = { type: 'geofenceEvent', data };
    await Promise.all([deps.bus.publish('geofence', push), deps.bus.publish(`geofence:${data.geofence_id}`, push)]);
  }
  if (events.length)
    deps.logger.debug({ events: events.length, points: points.length }, 'geofence transitions published');
  return events;
}
