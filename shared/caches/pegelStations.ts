import type Redis from 'ioredis';
import { LRUCache } from 'lru-cache';
import type { Config } from '../config';
import type { Logger } from '../logger';
import { fetchStations, PegelQuery, PegelUnavailableError } from '../pegel/client';
import { mapStation, WaterLevelStation } from '../pegel/stations';
import { redisKey, RedisKeys } from '../redis';

/**
 * Cache of PEGELONLINE answers in Redis, shared by every api instance (README "Water levels"):
 * - an answer is fresh for FRESH_SECONDS; it is kept for STALE_KEEP_SECONDS to be served, marked
 *   stale, when upstream fails;
 * - one upstream request at a time per query, across instances: the instance that takes the
 *   query's lock (SET NX) fetches, the others wait for its answer in Redis (and, within one
 *   process, concurrent callers share one promise);
 * - nothing waits longer than REQUEST_BUDGET_MS: upstream gets UPSTREAM_TIMEOUT_MS, then the answer
 *   is stale or a 503.
 * With Redis unreachable each process asks upstream itself (still one request per query at a time).
 *
 * Each process also keeps the answers it last read or stored, decoded (`decoded`, by entry key). A
 * lookup first reads the answer's stamp (its `fetched_at`, a key of a few bytes written in the same
 * MULTI as the answer) and uses the decoded copy while the stamp still names it: the whole answer
 * (about 700 stations, 200 KB of JSON from PEGELONLINE) is read and parsed once per fetch, not once
 * per lookup, and every lookup still sees what Redis holds. With Redis unreachable a decoded answer
 * that is still fresh is served as it is instead of asking upstream.
 */
export const FRESH_SECONDS = 180;
const STALE_KEEP_SECONDS = 24 * 3600;
export const UPSTREAM_TIMEOUT_MS = 4000;
const REQUEST_BUDGET_MS = 4500;
const LOCK_MS = UPSTREAM_TIMEOUT_MS + 2000;
const POLL_MS = 50;

export type CacheState = 'hit' | 'miss' | 'stale';

export interface StationsAnswer {
  stations: WaterLevelStation[];
  cache: CacheState;
}

interface Entry {
  fetched_at: number;
  stations: WaterLevelStation[];
}

export interface PegelDeps {
  redis: Redis;
  config: Pick<Config, 'redisPrefix' | 'pegelApiUrl'>;
  logger: Logger;
}

/** The cache key of a query: water in upper case, coordinates to 5 decimals (about a metre). */
export function queryKey(q: PegelQuery): string {
  const parts = [q.water ? `w=${q.water.toUpperCase()}` : 'all'];
  if (q.latitude !== undefined && q.longitude !== undefined && q.radius !== undefined)
    parts.push(`at=${q.latitude.toFixed(5)},${q.longitude.toFixed(5)},r=${q.radius}`);
  return parts.join(';');
}

/** Lookups in flight per process (per Redis connection: one per api instance), by query. */
const inflight = new WeakMap<Redis, Map<string, Promise<StationsAnswer>>>();

/**
 * Answers decoded per process (per Redis connection), by entry key; bounded, since searches with
 * a radius make one entry per position.
 */
const decodedByRedis = new WeakMap<Redis, LRUCache<string, Entry>>();
function decodedOf(redis: Redis): LRUCache<string, Entry> {
  let d = decodedByRedis.get(redis);
  if (!d) decodedByRedis.set(redis, (d = new LRUCache<string, Entry>({ max: 256 })));
  return d;
}

/** The stations of a query (see the module comment); throws PegelUnavailableError for a 503. */
export function pegelStations(deps: PegelDeps, q: PegelQuery): Promise<StationsAnswer> {
  const query: PegelQuery = { ...q, water: q.water?.toUpperCase() };
  const key = queryKey(query);
  let mine = inflight.get(deps.redis);
  if (!mine) inflight.set(deps.redis, (mine = new Map()));
  const running = mine;
  let p = running.get(key);
  if (!p) {
    p = resolve(deps, query).finally(() => running.delete(key));
    running.set(key, p);
  }
  return p;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The answer stored under `key` (stamp under `stampKey`): the decoded copy while the stamp names
 * it, else read and decoded (and kept).
 */
async function readEntry(redis: Redis, key: string, stampKey: string): Promise<Entry | undefined> {
  const decoded = decodedOf(redis);
  const kept = decoded.get(key);
  if (kept && Number(await redis.get(stampKey)) === kept.fetched_at) return kept;
  const raw = await redis.get(key);
  if (!raw) {
    decoded.delete(key);
    return undefined;
  }
  const entry = JSON.parse(raw) as Entry;
  decoded.set(key, entry);
  return entry;
}

const isFresh = (e: Entry): boolean => Date.now() - e.fetched_at < FRESH_SECONDS * 1000;

async function resolve(deps: PegelDeps, q: PegelQuery): Promise<StationsAnswer> {
  const started = Date.now();
  const { redis, config } = deps;
  const qk = queryKey(q);
  const entryKey = redisKey(config, RedisKeys.pegelStations(qk));
  const lockKey = redisKey(config, RedisKeys.pegelFetchLock(qk));
  const stampKey = redisKey(config, RedisKeys.pegelStamp(qk));
  let stale: Entry | undefined;
  try {
    stale = await readEntry(redis, entryKey, stampKey);
    if (stale && isFresh(stale)) return { stations: stale.stations, cache: 'hit' };
    const token = `${process.pid}:${Math.random()}`;
    while (Date.now() - started < REQUEST_BUDGET_MS) {
      if ((await redis.set(lockKey, token, 'PX', LOCK_MS, 'NX')) === 'OK') {
        try {
          // The previous holder may have stored its answer and let go just before we took the lock.
          const fresh = await readEntry(redis, entryKey, stampKey);
          if (fresh && isFresh(fresh)) return { stations: fresh.stations, cache: 'hit' };
          const left = REQUEST_BUDGET_MS - (Date.now() - started);
          const stations = await fetchAndStore(
            deps,
            q,
            { entryKey, stampKey },
            Math.max(200, Math.min(UPSTREAM_TIMEOUT_MS, left)),
          );
          return { stations, cache: 'miss' };
        } catch (err) {
          if (stale && err instanceof PegelUnavailableError) return staleAnswer(deps, stale, err);
          throw err;
        } finally {
          // Only our own lock: it may have expired and been taken by another instance meanwhile.
          await redis
            .eval(
              "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
              1,
              lockKey,
              token,
            )
            .catch(() => undefined);
        }
      }
      // Another instance is fetching: wait for its answer (or for its lock to go, then try ourselves).
      await sleep(POLL_MS);
      const now = await readEntry(redis, entryKey, stampKey);
      if (now && isFresh(now) && now.fetched_at !== stale?.fetched_at) return { stations: now.stations, cache: 'hit' };
      if (!(await redis.exists(lockKey)) && stale) {
        // The fetcher gave up (upstream failed): its failure is ours too, within our budget.
        const again = await readEntry(redis, entryKey, stampKey);
        if (again && again.fetched_at === stale.fetched_at)
          return staleAnswer(deps, stale, new PegelUnavailableError('upstream failed for another instance'));
      }
    }
    if (stale) return staleAnswer(deps, stale, new PegelUnavailableError('upstream did not answer in time'));
    throw new PegelUnavailableError('upstream did not answer in time');
  } catch (err) {
    if (err instanceof PegelUnavailableError) throw err;
    // Redis failed: a fresh answer this process holds, else upstream directly (in-process single
    // flight still holds).
    const decoded = decodedOf(redis);
    const kept = decoded.get(entryKey);
    if (kept && isFresh(kept)) return { stations: kept.stations, cache: 'hit' };
    deps.logger.warn({ err: (err as Error).message }, 'pegel cache unavailable; asking upstream directly');
    const raw = await fetchStations(config.pegelApiUrl!, q, Math.max(500, REQUEST_BUDGET_MS - (Date.now() - started)));
    const stations = raw.map((s) => mapStation(s)).filter((s) => s !== undefined);
    decoded.set(entryKey, { fetched_at: Date.now(), stations });
    return { stations, cache: 'miss' };
  }
}

function staleAnswer(deps: PegelDeps, stale: Entry, err: Error): StationsAnswer {
  deps.logger.warn(
    { err: err.message, fetchedAt: new Date(stale.fetched_at).toISOString() },
    'pegel upstream failed; serving stale stations',
  );
  return { stations: stale.stations, cache: 'stale' };
}

/** Fetches upstream, maps each station with the level seen last time (trend), stores the entry. */
async function fetchAndStore(
  deps: PegelDeps,
  q: PegelQuery,
  keys: { entryKey: string; stampKey: string },
  timeoutMs: number,
): Promise<WaterLevelStation[]> {
  const { redis, config } = deps;
  const raw = await fetchStations(config.pegelApiUrl!, q, timeoutMs);
  const levelsKey = redisKey(config, RedisKeys.pegelLevels);
  const ids = raw.map((s) => s.uuid);
  const previous = ids.length ? await redis.hmget(levelsKey, ...ids).catch(() => ids.map(() => null)) : [];
  const stations = raw
    .map((s, i) => {
      const prev = previous[i];
      return mapStation(s, prev === null || prev === undefined ? undefined : Number(prev));
    })
    .filter((s) => s !== undefined);
  const levels = stations.flatMap((s) => [s.station_id, String(s.level_cm)]);
  const entry: Entry = { fetched_at: Date.now(), stations };
  const multi = redis
    .multi()
    .set(keys.entryKey, JSON.stringify(entry), 'EX', STALE_KEEP_SECONDS)
    .set(keys.stampKey, String(entry.fetched_at), 'EX', STALE_KEEP_SECONDS);
  if (levels.length) multi.hset(levelsKey, ...levels);
  // The answer is good even when it cannot be stored (waiting instances then try themselves).
  await multi.exec().catch((err: Error) => deps.logger.warn({ err: err.message }, 'could not cache pegel stations'));
  decodedOf(redis).set(keys.entryKey, entry);
  return stations;
}
