import type { Knex } from 'knex';
import type Redis from 'ioredis';
import type { Config } from '../config';
import type { GpsPushData } from '../events';
import { GPS_POINT_COLUMNS, GpsPointRow, presentGpsPoint } from '../presenters/gpsPoint';
import { redisKey, RedisKeys } from '../redis';
import { computeOncePerTurn } from '../rowLoader';
import { trackingConfig } from './trackingConfig';

/** Spec §8: the latest GPS point is cached for 5 minutes (system config gps.latest_cache_seconds). */
const GPS_LATEST_TTL_SECONDS = 300;

/** The configured cache lifetime; the spec default when the configuration cannot be read. */
async function ttlSeconds(db: Knex): Promise<number> {
  return trackingConfig(db).then(
    (c) => c.latestCacheSeconds,
    () => GPS_LATEST_TTL_SECONDS,
  );
}

/*
 * Cache of the latest point, globally and per device, kept exact under concurrent writes:
 *
 * A value is `<flag><sort key><json>`. The sort key orders points like the database does
 * (timestamp, then created_at, then id), fixed width so Lua compares it as a string. The flag is
 * 'c' (complete: the newest point in the database) or 'p' (partial: the newest point written since
 * the key went cold; older ones may be newer in the database). Writers only ever raise the value
 * (set-if-newer), so a buffered batch of old points never replaces a newer position; a writer on a
 * cold key leaves a partial value. A reader trusts only complete values: otherwise it queries the
 * database and merges its result with whatever writers stored meanwhile, which yields the true
 * maximum (every point committed before the query is in the result, every later one is either in
 * the partial value already or will raise the complete value afterwards).
 */
const SORT_KEY_LENGTH = 15 + 15 + 36;
const NONE_SORT_KEY = '0'.repeat(SORT_KEY_LENGTH);

const WRITE_SCRIPT = `
local ttl = tonumber(ARGV[1])
for i, k in ipairs(KEYS) do
  local sort = ARGV[2 * i]
  local payload = ARGV[2 * i + 1]
  local cur = redis.call('GET', k)
  if not cur then
    redis.call('SET', k, 'p' .. sort .. payload, 'EX', ttl)
  elseif sort > string.sub(cur, 2, ${SORT_KEY_LENGTH + 1}) then
    redis.call('SET', k, string.sub(cur, 1, 1) .. sort .. payload, 'EX', ttl)
  end
end
return 1`;

// KEYS: the value, its generation. ARGV: ttl, sort key, payload, the generation read before the
// database. A drop of the key since then (a delete: forgetLatestGps) bumped the generation: the
// row read may be gone, so nothing is stored (nil).
const FILL_SCRIPT = `
if (redis.call('GET', KEYS[2]) or '') ~= ARGV[4] then return false end
local cur = redis.call('GET', KEYS[1])
local v
if cur and string.sub(cur, 2, ${SORT_KEY_LENGTH + 1}) > ARGV[2] then
  v = 'c' .. string.sub(cur, 2)
else
  v = 'c' .. ARGV[2] .. ARGV[3]
end
redis.call('SET', KEYS[1], v, 'EX', tonumber(ARGV[1]))
return v`;

type CacheRedis = Redis & {
  gpsLatestWrite(numKeys: number, ...args: Array<string | number>): Promise<number>;
  gpsLatestFill(
    key: string,
    generationKey: string,
    ttl: number,
    sort: string,
    payload: string,
    generation: string,
  ): Promise<string | null>;
};

const prepared = new WeakSet<Redis>();
function scripts(redis: Redis): CacheRedis {
  if (!prepared.has(redis)) {
    redis.defineCommand('gpsLatestWrite', { lua: WRITE_SCRIPT });
    redis.defineCommand('gpsLatestFill', { numberOfKeys: 2, lua: FILL_SCRIPT });
    prepared.add(redis);
  }
  return redis as CacheRedis;
}

const pad = (n: number) => String(Math.max(0, n)).padStart(15, '0');

/** The database order of a point as a fixed-width string (greater = later). */
export function gpsSortKey(p: Pick<GpsPointRow, 'timestamp' | 'created_at' | 'id'>): string {
  return pad(p.timestamp.getTime()) + pad(p.created_at.getTime()) + p.id;
}

function latestKey(config: Pick<Config, 'redisPrefix'>, deviceId?: string | null): string {
  return redisKey(config, deviceId ? RedisKeys.gpsLatestDevice(deviceId) : RedisKeys.gpsLatest);
}

function generationKey(config: Pick<Config, 'redisPrefix'>, deviceId?: string | null): string {
  return redisKey(config, deviceId ? RedisKeys.gpsLatestDeviceGeneration(deviceId) : RedisKeys.gpsLatestGeneration);
}

/** How long a generation outlives its last bump: far longer than any fill takes. */
const GENERATION_TTL_SECONDS = 3600;

function decode(value: string): GpsPushData | null {
  const json = value.slice(1 + SORT_KEY_LENGTH);
  return json ? (JSON.parse(json) as GpsPushData) : null;
}

/** How many raised points a process remembers (about two seconds of ingestion at full speed). */
const RAISED_MEMORY = 20_000;

/**
 * Points this process has raised the cache with and nobody has offered again yet, by id (random
 * UUIDs: one deployment's points, whatever the Redis prefix), oldest first. Every point is offered twice: by the request that stored it and by
 * the outbox relay, which carries it out again for the case that request could not reach Redis.
 * The second offer of a point raised here is answered from memory, without a round trip: the
 * cache already holds that point or a newer one (writers only raise), or it was dropped since, and
 * a dropped key is filled from the database by its next reader. A relay in another process simply
 * raises again, which is harmless: the write is set-if-newer.
 */
const raised = new Map<string, true>();

function rememberRaised(points: GpsPointRow[]): void {
  for (const p of points) raised.set(p.id, true);
  if (raised.size <= RAISED_MEMORY) return;
  for (const k of raised.keys()) {
    raised.delete(k);
    if (raised.size <= RAISED_MEMORY) return;
  }
}

/**
 * Raises the cached latest points (global and per device) with freshly inserted points. One round
 * trip for a whole batch: only the newest point of each key is sent. Points this process raised
 * the cache with before are skipped (see `raised`); a batch of only such points costs nothing.
 */
export async function recordLatestGps(
  db: Knex,
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  offered: GpsPointRow[],
): Promise<void> {
  const points = offered.filter((p) => !raised.delete(p.id));
  if (points.length === 0) return;
  const newest = new Map<string, { sort: string; point: GpsPointRow }>();
  const consider = (key: string, point: GpsPointRow, sort: string) => {
    const cur = newest.get(key);
    if (!cur || sort > cur.sort) newest.set(key, { sort, point });
  };
  for (const p of points) {
    const sort = gpsSortKey(p);
    consider(latestKey(config), p, sort);
    if (p.device_id) consider(latestKey(config, p.device_id), p, sort);
  }
  const keys = [...newest.keys()];
  const args: string[] = [];
  for (const k of keys) {
    const { sort, point } = newest.get(k)!;
    args.push(sort, JSON.stringify(presentGpsPoint(point)));
  }
  await scripts(redis).gpsLatestWrite(keys.length, ...keys, await ttlSeconds(db), ...args);
  rememberRaised(points);
}

/** Drops cached latest points (after a delete that may have removed or changed them). */
export async function forgetLatestGps(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  deviceIds: Array<string | null>,
): Promise<void> {
  const devices: Array<string | null> = [null, ...new Set(deviceIds.filter((d): d is string => !!d))];
  // One transaction: each value goes and its generation moves, so a reader that read the database
  // before the delete cannot store what it read (FILL_SCRIPT).
  const tx = redis.multi();
  for (const d of devices) {
    const gen = generationKey(config, d);
    tx.del(latestKey(config, d)).incr(gen).expire(gen, GENERATION_TTL_SECONDS);
  }
  const results = await tx.exec();
  const failed = results?.find(([err]) => err);
  if (!results || failed) throw failed?.[0] ?? new Error('could not drop the latest GPS cache');
}

/** Identical latest-point reads of one turn (computeOncePerTurn): one cache read and decode for all. */
const latestInTurn = computeOncePerTurn<GpsPushData | null>();

/**
 * The latest point, globally or for one device identifier (null when there is none): from the
 * cache when it holds a complete value, else from the database, merged into the cache. The
 * callers of one event-loop turn asking for the same key share one read and its (frozen) answer;
 * nothing is kept past the turn.
 */
export function latestGps(
  db: Knex,
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  deviceId?: string,
): Promise<GpsPushData | null> {
  const key = latestKey(config, deviceId);
  return latestInTurn(db, key, async () => {
    const point = await readLatestGps(db, redis, key, generationKey(config, deviceId), deviceId);
    return point && Object.freeze(point);
  });
}

async function readLatestGps(
  db: Knex,
  redis: Redis,
  key: string,
  genKey: string,
  deviceId?: string,
): Promise<GpsPushData | null> {
  const [cached, generation] = await redis.mget(key, genKey).catch(() => [undefined, undefined]);
  if (cached && cached[0] === 'c') return decode(cached);
  const q = db('gps_points')
    .first(...GPS_POINT_COLUMNS)
    .orderBy([
      { column: 'timestamp', order: 'desc' },
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ]);
  if (deviceId) q.where('device_id', deviceId);
  const row = (await q) as GpsPointRow | undefined;
  try {
    const merged =
      generation === undefined
        ? null // Redis did not answer the read: nothing to compare a fill with, so none.
        : await scripts(redis).gpsLatestFill(
            key,
            genKey,
            await ttlSeconds(db),
            row ? gpsSortKey(row) : NONE_SORT_KEY,
            row ? JSON.stringify(presentGpsPoint(row)) : '',
            generation ?? '',
          );
    // Not stored (a delete came between the read and the fill): the database's answer, as read.
    if (merged === null) return row ? presentGpsPoint(row) : null;
    return decode(merged);
  } catch {
    // Cache unreachable: the database answer is correct, just not cached.
    return row ? presentGpsPoint(row) : null;
  }
}
