import type { Knex } from 'knex';
import type Redis from 'ioredis';
import type { ChainableCommander } from 'ioredis';
import type { Config } from '../config';
import { PubSub, type EventBus, type ServerPush } from '../events';
import { distanceKm, GeofenceIndex, IndexedFence } from '../domain/geofenceIndex';
import type { Logger } from '../logger';
import { redisKey, RedisKeys } from '../redis';
import { gpsSortKey } from '../caches/gpsLatest';
import type { GpsPointRow } from '../presenters/gpsPoint';

export type GeofenceEventData = Extract<ServerPush, { type: 'geofenceEvent' }>['data'];

/** Inside/outside state of a (device, geofence) pair is forgotten after a week without points. */
const STATE_TTL_SECONDS = 7 * 24 * 3600;
const SORT_KEY_LENGTH = 15 + 15 + 36;

/*
 * One state per (device, geofence): `<sort key of the last point applied>|<confirmed 0|1>|<pending
 * -|0|1>|<pending since, ms of GPS time>`. Points apply in database order only (a late, older point
 * is ignored), so concurrent jobs and buffered batches cannot flip the state backwards. A point
 * whose inside/outside differs from the confirmed state starts (or continues) a pending change,
 * which is confirmed, and reported, once it has held for the fence's min_dwell_seconds; a point
 * agreeing with the confirmed state cancels it (border jitter). Without a previous state the
 * device counts as outside. The device's set of fences it is inside (or pending inside) is kept
 * beside it, so an exit is noticed even when the point is far from the fence.
 * A confirmed change is also recorded, in the same atomic run, as pending for the device
 * (RedisKeys.geofenceTransitions: member `<sort>|<fence>|<inside 0|1>`) until its event is written
 * and published (PUBLISH_SCRIPT removes it and publishes in one step): a run cut off in between,
 * its worker killed, leaves it there for the next evaluation of the device to finish.
 * KEYS: state key, inside-set key, transitions key per entry. ARGV: ttl, then sort, inside, ts,
 * dwell ms, fence id per entry. Returns the 1-based indexes of the entries whose confirmed state changed.
 */
const TRANSITION_SCRIPT = `
local ttl = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS / 3 do
  local k = KEYS[3 * i - 2]
  local set = KEYS[3 * i - 1]
  local a = 1 + (i - 1) * 5
  local sort, inside, ts, dwell, fence = ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), ARGV[a + 5]
  local cur = redis.call('GET', k)
  local confirmed, pending, since, apply = '0', '-', 0, true
  if cur then
    local s, c, p, t = string.match(cur, '^([^|]*)|([01])|([-01])|(%d+)$')
    if s == nil then
      s = string.sub(cur, 1, ${SORT_KEY_LENGTH})
      c = string.sub(cur, ${SORT_KEY_LENGTH + 1}, ${SORT_KEY_LENGTH + 1})
      p = '-'
      t = '0'
    end
    if sort > s then
      confirmed, pending, since = c, p, tonumber(t)
    else
      apply = false
    end
  end
  if apply then
    local changed = false
    if inside == confirmed then
      pending, since = '-', 0
    else
      if pending ~= inside then pending, since = inside, ts end
      if ts - since >= dwell then
        confirmed, pending, since, changed = inside, '-', 0, true
      end
    end
    redis.call('SET', k, sort .. '|' .. confirmed .. '|' .. pending .. '|' .. since, 'EX', ttl)
    if confirmed == '1' or pending == '1' then
      redis.call('SADD', set, fence)
      redis.call('EXPIRE', set, ttl)
    else
      redis.call('SREM', set, fence)
    end
    if changed then
      redis.call('ZADD', KEYS[3 * i], 0, sort .. '|' .. fence .. '|' .. confirmed)
      redis.call('EXPIRE', KEYS[3 * i], ttl)
      out[#out + 1] = i
    end
  end
end
return out`;

/*
 * Publishes the events of recorded transitions and takes them off their device's pending
 * transitions, in one step: a transition still pending has not been published, one taken off has,
 * so a run again after a crash publishes exactly the missing ones, and two runs finishing the same
 * transition (the job and its stalled retry, two jobs of one device) publish it once. An entry
 * without a message (its fence is gone) is only taken off.
 * KEYS: transitions key per entry. ARGV: the `geofence` channel, then member, fence channel,
 * message per entry. Returns the 1-based indexes of the entries published.
 */
const PUBLISH_SCRIPT = `
local out = {}
for i = 1, #KEYS do
  local a = 2 + (i - 1) * 3
  if redis.call('ZREM', KEYS[i], ARGV[a]) == 1 and ARGV[a + 2] ~= '' then
    redis.call('PUBLISH', ARGV[1], ARGV[a + 2])
    redis.call('PUBLISH', ARGV[a + 1], ARGV[a + 2])
    out[#out + 1] = i
  end
end
return out`;

/** Pending points one job reads per device and round (the size of a geofence job). */
const PENDING_CHUNK = 1000;

// KEYS: the pending sets of the tracks. ARGV: the sets' lifetime, then per key the number of its
// members and the members (sort keys, all with score 0: ordered by value). ZADD takes at most
// PENDING_CHUNK members at once, so no call unpacks more arguments than Lua's stack holds.
const PENDING_SCRIPT = `
local at = 2
for i, k in ipairs(KEYS) do
  local n = tonumber(ARGV[at])
  at = at + 1
  local done = 0
  while done < n do
    local args = {}
    local m = math.min(n - done, ${PENDING_CHUNK})
    for x = 1, m do
      args[2 * x - 1] = 0
      args[2 * x] = ARGV[at + done + x - 1]
    end
    redis.call('ZADD', k, unpack(args))
    done = done + m
  end
  at = at + n
  redis.call('EXPIRE', k, ARGV[1])
end
return 1`;

type TransitionRedis = Redis & {
  geofenceTransitions(numKeys: number, ...args: Array<string | number>): Promise<number[]>;
  geofencePublish(numKeys: number, ...args: string[]): Promise<number[]>;
  geofencePending(numKeys: number, ...args: Array<string | number>): Promise<number>;
};
const prepared = new WeakSet<Redis>();
function scripts(redis: Redis): TransitionRedis {
  if (!prepared.has(redis)) {
    redis.defineCommand('geofenceTransitions', { lua: TRANSITION_SCRIPT });
    redis.defineCommand('geofencePublish', { lua: PUBLISH_SCRIPT });
    redis.defineCommand('geofencePending', { lua: PENDING_SCRIPT });
    prepared.add(redis);
  }
  return redis as TransitionRedis;
}

/**
 * The active fences as a spatial index, rebuilt only when the fences changed: the `geofences`
 * version (the sum of its shards, bumped by a trigger in every writing statement, migrations 20261124080000
 * and 20261125000000) and the
 * evaluation switch come from one read of two indexed rows per job.
 */
const indexes = new WeakMap<Knex, { version: string; index: GeofenceIndex }>();
async function activeFenceIndex(db: Knex): Promise<GeofenceIndex | null> {
  const {
    rows: [v],
  } = await db.raw<{ rows: Array<{ version: string | null; enabled: boolean }> }>(
    `SELECT (SELECT sum(version) FROM table_versions WHERE table_name = 'geofences') AS version,
            COALESCE((SELECT value FROM system_config WHERE key = 'geofence.evaluation_enabled'), 'true'::jsonb) <> 'false'::jsonb AS enabled`,
  );
  if (!v.enabled) return null;
  const version = String(v.version);
  const cached = indexes.get(db);
  if (cached?.version === version) return cached.index;
  const { rows } = await db.raw<{ rows: IndexedFence[] }>(
    'SELECT id, name, latitude, longitude, radius_km, min_dwell_seconds, metadata FROM geofences WHERE is_active',
  );
  const index = new GeofenceIndex(rows);
  indexes.set(db, { version, index });
  return index;
}

interface Entry {
  data: GeofenceEventData;
  latitude: number;
  longitude: number;
  gpsPointId: string;
  /** ISO 8601 (the JSON of RedisKeys.geofenceUnrecorded entries has this shape). */
  occurredAt: string;
}

/**
 * A transition the state script confirmed, on its way to its event: its member of the device's
 * pending transitions, and the event (null when its fence or point is gone: it is only taken off).
 */
interface Transition {
  key: string;
  member: string;
  entry: Entry | null;
}

/** Entries left by earlier releases (RedisKeys.geofenceUnrecorded), taken back this many at once. */
const UNRECORDED_CHUNK = 500;
/** Pending transitions one evaluation reads per device and round, and events per write and publish. */
const TRANSITION_CHUNK = 1000;

/** What evaluation needs from its process. */
type EvaluateDeps = { db: Knex; redis: Redis; bus: EventBus; config: Pick<Config, 'redisPrefix'>; logger: Logger };

/** The columns evaluation reads of a GPS point. */
type EvaluatedPoint = Pick<GpsPointRow, 'id' | 'device_id' | 'latitude' | 'longitude' | 'timestamp' | 'created_at'>;

/** Length of a uuid, the tail of a sort key. */
const ID_LENGTH = 36;

const trackOf = (p: Pick<GpsPointRow, 'device_id'>) => p.device_id ?? '-';
const pendingKey = (config: Pick<Config, 'redisPrefix'>, track: string) =>
  redisKey(config, RedisKeys.geofencePending(track));
const transitionsKey = (config: Pick<Config, 'redisPrefix'>, track: string) =>
  redisKey(config, RedisKeys.geofenceTransitions(track));

async function execAll(pipeline: ChainableCommander): Promise<unknown[]> {
  const results = (await pipeline.exec()) ?? [];
  for (const [err] of results) if (err) throw err;
  return results.map(([, value]) => value);
}

async function loadPoints(db: Knex, ids: string[]): Promise<EvaluatedPoint[]> {
  return db('gps_points')
    .whereIn('id', ids)
    .select('id', 'device_id', 'latitude', 'longitude', 'timestamp', 'created_at');
}

/**
 * Records GPS points as queued for geofence evaluation, per device, before their job is enqueued
 * (the outbox relay does it). A job evaluates every point of its devices queued up to its own, so
 * jobs that run in parallel or out of order (a backlog after a worker restart) still apply each
 * device's points in time order. Idempotent: a relay pass replayed adds the same members.
 */
export async function markGeofencePending(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  points: Array<Pick<GpsPointRow, 'id' | 'device_id' | 'timestamp' | 'created_at'>>,
): Promise<void> {
  const byTrack = new Map<string, string[]>();
  for (const p of points) {
    let members = byTrack.get(trackOf(p));
    if (!members) byTrack.set(trackOf(p), (members = []));
    members.push(gpsSortKey(p));
  }
  if (byTrack.size === 0) return;
  // One command for the whole batch (a relay pass carries points of hundreds of devices): a
  // pipeline of a ZADD and an EXPIRE per device was the api's most frequent Redis command.
  const keys: string[] = [];
  const args: Array<string | number> = [STATE_TTL_SECONDS];
  for (const [track, members] of byTrack) {
    keys.push(pendingKey(config, track));
    args.push(members.length, ...members);
  }
  await scripts(redis).geofencePending(keys.length, ...keys, ...args);
}

/**
 * Evaluates the given GPS points against the active geofences: candidate fences come from a grid
 * index (plus the fences the device is inside), the exact test is the haversine distance against
 * radius_km. The inside/outside state per (device, geofence) lives in Redis with each fence's
 * min_dwell_seconds debounce; every confirmed enter or exit is written to geofence_events (only
 * for fences that still exist) and published as `geofenceEvent` on `geofence` and
 * `geofence:<id>`. Points without a device identifier share one anonymous track. Honours the
 * `geofence.evaluation_enabled` system config.
 *
 * Points of the same devices queued earlier and not yet evaluated (`markGeofencePending`) are
 * evaluated with them, all in time order: whichever job of a backlog runs first applies the older
 * points before its own, and the jobs of those older points find nothing left to do.
 *
 * Crash-safe: a confirmed transition stays pending for its device in Redis (written by the state
 * script itself) until its event is published; the write is idempotent (one row per fence and
 * point) and the publish takes it off in the same step. A run cut off anywhere (its worker killed,
 * the database or Redis failing it) leaves the state moved on and the transition pending, and the
 * next evaluation of the device (the job's retry, or any later one) first writes what is missing
 * and publishes what was not: every event once.
 */
export async function evaluateGeofences(deps: EvaluateDeps, gpsPointIds: string[]): Promise<GeofenceEventData[]> {
  if (gpsPointIds.length === 0) return [];
  const events: GeofenceEventData[] = await recordKept(deps);
  let own = await loadPoints(deps.db, gpsPointIds);
  if (own.length === 0) return events;
  const index = await activeFenceIndex(deps.db);
  // The first round also finishes the transitions an earlier run of these devices left pending
  // (with evaluation off they wait: their fences are not at hand).
  let finish = index !== null;
  while (own.length) {
    // Per track, the pending points up to the job's newest one (the older ones first, a chunk at a time).
    const newest = new Map<string, string>();
    for (const p of own) {
      const sort = gpsSortKey(p);
      if (!(newest.get(trackOf(p))! >= sort)) newest.set(trackOf(p), sort);
    }
    const tracks = [...newest.keys()];
    const read = deps.redis.pipeline();
    for (const track of tracks)
      read.zrangebylex(pendingKey(deps.config, track), '-', `[${newest.get(track)}`, 'LIMIT', 0, PENDING_CHUNK);
    if (finish)
      for (const track of tracks)
        read.zrangebylex(transitionsKey(deps.config, track), '-', '+', 'LIMIT', 0, TRANSITION_CHUNK);
    const lists = (await execAll(read)) as string[][];
    const pending = lists.slice(0, tracks.length);
    if (finish) {
      finish = false;
      for (const e of await finishTransitions(deps, index!, tracks, lists.slice(tracks.length))) events.push(e);
    }
    // A full chunk may hide older pending points: the job's own points after it wait for the next round.
    const bound = new Map(
      tracks.map((t, i) => [t, pending[i].length === PENDING_CHUNK ? pending[i].at(-1)! : newest.get(t)!]),
    );
    const now = own.filter((p) => gpsSortKey(p) <= bound.get(trackOf(p))!);
    own = own.filter((p) => gpsSortKey(p) > bound.get(trackOf(p))!);
    if (index && index.size > 0) {
      const ownIds = new Set(now.map((p) => p.id));
      const others = pending
        .flat()
        .map((m) => m.slice(-ID_LENGTH))
        .filter((id) => !ownIds.has(id));
      const points = others.length ? [...now, ...(await loadPoints(deps.db, others))] : now;
      // The order the transition script applies them in (ties on the timestamp by acceptance).
      const sorted = points.map((p) => ({ p, sort: gpsSortKey(p) })).sort((a, b) => (a.sort < b.sort ? -1 : 1));
      // Not events.push(...): a round may confirm more transitions than a call takes arguments.
      for (const e of await applyInOrder(
        deps,
        index,
        sorted.map((x) => x.p),
      ))
        events.push(e);
    }
    // Evaluated (or evaluation off): no longer pending. A job that fails before this leaves them for its retry.
    const done = deps.redis.pipeline();
    tracks.forEach((track, i) => {
      if (pending[i].length) done.zrem(pendingKey(deps.config, track), ...pending[i]);
    });
    await execAll(done);
  }
  return events;
}

/** The event of point `p` at fence `f`. */
function entryOf(f: IndexedFence, p: EvaluatedPoint, inside: boolean, distance: number): Entry {
  return {
    data: {
      geofence_id: f.id,
      geofence_name: f.name,
      event: inside ? 'enter' : 'exit',
      device_id: p.device_id,
      distance_km: Math.round(distance * 1000) / 1000,
      metadata: f.metadata ?? null,
    },
    latitude: p.latitude,
    longitude: p.longitude,
    gpsPointId: p.id,
    occurredAt: (p.timestamp as Date).toISOString(),
  };
}

/**
 * Finishes the transitions runs of these devices confirmed and did not see through, oldest first
 * (`first`: each track's first chunk, already read): writes the events still missing and publishes
 * the ones not published yet. The event is rebuilt from the point and the fence as they are now;
 * one whose fence or point is gone is dropped.
 */
async function finishTransitions(
  deps: EvaluateDeps,
  index: GeofenceIndex,
  tracks: string[],
  first: string[][],
): Promise<GeofenceEventData[]> {
  const events: GeofenceEventData[] = [];
  let chunks = tracks.map((track, i) => ({ track, members: first[i] }));
  for (;;) {
    const listed = chunks.flatMap(({ track, members }) =>
      members.map((member) => ({ key: transitionsKey(deps.config, track), member })),
    );
    if (listed.length === 0) break;
    deps.logger.debug({ transitions: listed.length }, 'finishing geofence transitions an earlier run left');
    const ids = [...new Set(listed.map(({ member }) => member.slice(0, member.indexOf('|')).slice(-ID_LENGTH)))];
    const points = new Map((await loadPoints(deps.db, ids)).map((p) => [p.id, p]));
    const transitions = listed.map(({ key, member }): Transition => {
      const [sort, fenceId, inside] = member.split('|');
      const f = index.byId.get(fenceId);
      const p = points.get(sort.slice(-ID_LENGTH));
      const entry = f && p ? entryOf(f, p, inside === '1', distanceKm(f, p.latitude, p.longitude)) : null;
      return { key, member, entry };
    });
    for (const e of await record(deps, transitions)) events.push(e);
    // Every member read is off its list now: a full chunk may have more behind it.
    chunks = chunks.filter((c) => c.members.length === TRANSITION_CHUNK);
    if (chunks.length === 0) break;
    const read = deps.redis.pipeline();
    for (const { track } of chunks)
      read.zrangebylex(transitionsKey(deps.config, track), '-', '+', 'LIMIT', 0, TRANSITION_CHUNK);
    const again = (await execAll(read)) as string[][];
    chunks = chunks.map((c, i) => ({ track: c.track, members: again[i] }));
  }
  return events;
}

/** Applies points, sorted in time order, to the transition state; records and publishes the changes. */
async function applyInOrder(
  deps: EvaluateDeps,
  index: GeofenceIndex,
  points: EvaluatedPoint[],
): Promise<GeofenceEventData[]> {
  if (points.length === 0) return [];

  // Per device: the fences it is inside (or pending inside) plus the candidates of each of its points.
  const devices = [...new Set(points.map((p) => (p.device_id as string | null) ?? '-'))];
  const setKey = (device: string) => redisKey(deps.config, RedisKeys.geofenceInside(device));
  const inside = await Promise.all(devices.map((d) => deps.redis.smembers(setKey(d))));
  const fencesOf = new Map<string, Set<string>>(devices.map((d, i) => [d, new Set(inside[i])]));
  for (const p of points) {
    const set = fencesOf.get(p.device_id ?? '-')!;
    for (const f of index.candidates(p.latitude, p.longitude)) set.add(f.id);
  }

  // Per entry (point × fence): 3 keys (state, inside set, pending transitions) and 5 arguments.
  const keys: string[] = [];
  const args: Array<string | number> = [];
  const entries: Entry[] = [];
  for (const p of points) {
    const device = (p.device_id as string | null) ?? '-';
    const sort = gpsSortKey(p);
    const ts = (p.timestamp as Date).getTime();
    const transitions = transitionsKey(deps.config, device);
    for (const id of fencesOf.get(device)!) {
      const f = index.byId.get(id);
      if (!f) continue; // deleted or switched off: its state simply ages out
      const distance = distanceKm(f, p.latitude, p.longitude);
      const isInside = distance <= f.radius_km;
      keys.push(redisKey(deps.config, RedisKeys.geofenceState(device, f.id)), setKey(device), transitions);
      args.push(sort, isInside ? '1' : '0', ts, f.min_dwell_seconds * 1000, f.id);
      entries.push(entryOf(f, p, isInside, distance));
    }
  }
  if (entries.length === 0) return [];
  const events: GeofenceEventData[] = [];
  for (const run of transitionRuns(keys)) {
    const runArgs: Array<string | number> = [];
    for (const i of run) runArgs.push(keys[3 * i], keys[3 * i + 1], keys[3 * i + 2]);
    runArgs.push(STATE_TTL_SECONDS);
    for (const i of run) for (let a = 5 * i; a < 5 * i + 5; a++) runArgs.push(args[a]);
    const changed = await scripts(deps.redis).geofenceTransitions(3 * run.length, ...runArgs);
    // Recorded run by run: a later run that fails (Redis away) cannot hold up what earlier runs confirmed.
    if (changed.length) {
      const transitions = changed.map((n): Transition => {
        const i = run[n - 1];
        // As the state script wrote it: `<sort>|<fence>|<inside>`.
        return {
          key: keys[3 * i + 2],
          member: `${args[5 * i]}|${args[5 * i + 4]}|${args[5 * i + 1]}`,
          entry: entries[i],
        };
      });
      for (const e of await record(deps, transitions)) events.push(e);
    }
  }
  if (events.length)
    deps.logger.debug({ events: events.length, points: points.length }, 'geofence transitions published');
  return events;
}

/**
 * Entries (point × fence) per run of the transition script: 3 keys and 5 arguments each, so a
 * bounded spread into the call and a bounded time holding Redis. Points × candidate fences has no
 * bound of its own (100 points against 1,000 fences are 100,000 entries): taken as one call's
 * spread arguments they overflowed the stack ("Maximum call stack size exceeded" from about 18,000
 * entries), the job failed, its points stayed pending and every later point of the device failed
 * with them.
 */
const TRANSITION_RUN = 1000;

/**
 * The entries (indexes; `keys` holds the state key of entry i at 3i) cut into script runs of at
 * most TRANSITION_RUN entries, each in time order. A run takes whole states, all points of a
 * (device, fence) pair, so each state's sequence is applied by one atomic script run as before;
 * only a sequence longer than a run goes on in the next run, after it, which keeps its order (a job
 * of the device that runs in between applies the same pending points, oldest first, and this one
 * then finds them applied). A device's inside set changes per fence, so fences may go in any order.
 * Pushes of a round larger than a run therefore come per group of fences, each fence's in time order.
 */
function transitionRuns(keys: string[]): number[][] {
  const byState = new Map<string, number[]>();
  for (let i = 0; 3 * i < keys.length; i++) {
    let list = byState.get(keys[3 * i]);
    if (!list) byState.set(keys[3 * i], (list = []));
    list.push(i);
  }
  const runs: number[][] = [[]];
  for (const list of byState.values()) {
    if (runs.at(-1)!.length > 0 && runs.at(-1)!.length + list.length > TRANSITION_RUN) runs.push([]);
    for (const i of list) {
      if (runs.at(-1)!.length === TRANSITION_RUN) runs.push([]);
      runs.at(-1)!.push(i);
    }
  }
  // Within a run, time order across states too (the order one run of everything had).
  return runs.map((run) => run.sort((a, b) => a - b));
}

/**
 * Writes the events of confirmed transitions that are not written yet, then publishes those not
 * published yet and takes them off their device's pending transitions (PUBLISH_SCRIPT), a chunk at
 * a time. Returns the events this call published. A failure (the database or Redis away) leaves the
 * rest pending, for the job's retry or the device's next evaluation.
 */
async function record(deps: EvaluateDeps, transitions: Transition[]): Promise<GeofenceEventData[]> {
  const events: GeofenceEventData[] = [];
  const all = redisKey(deps.config, PubSub.ws('geofence'));
  for (let from = 0; from < transitions.length; from += TRANSITION_CHUNK) {
    const chunk = transitions.slice(from, from + TRANSITION_CHUNK);
    const { live } = await writeEvents(
      deps,
      chunk.flatMap((t) => (t.entry ? [t.entry] : [])),
    );
    const keys: string[] = [];
    const args: string[] = [all];
    for (const { key, member, entry } of chunk) {
      keys.push(key);
      const publish = entry !== null && live.has(eventKey(entry));
      const message: ServerPush | undefined = publish ? { type: 'geofenceEvent', data: entry.data } : undefined;
      args.push(
        member,
        message ? redisKey(deps.config, PubSub.ws(`geofence:${entry!.data.geofence_id}`)) : '',
        message ? JSON.stringify(message) : '',
      );
    }
    for (const n of await scripts(deps.redis).geofencePublish(keys.length, ...keys, ...args))
      events.push(chunk[n - 1].entry!.data);
  }
  return events;
}

/** An event's identity: one per fence and point (the unique index geofence_events_point_unique). */
const eventKey = (e: Entry) => `${e.data.geofence_id}|${e.gpsPointId}`;

/**
 * Writes the events not written yet (one row per fence and point: a run again after a crash writes
 * none twice), only for fences that still exist (one deleted meanwhile takes its history with it).
 * One statement. Returns the identities (eventKey) of the entries whose fence exists (their row is
 * there now, written by this statement or before) and of those this statement inserted.
 */
async function writeEvents(
  deps: EvaluateDeps,
  entries: Entry[],
): Promise<{ live: Set<string>; inserted: Set<string> }> {
  if (entries.length === 0) return { live: new Set(), inserted: new Set() };
  const { rows } = await deps.db.raw<{ rows: Array<{ geofence_id: string; gps_point_id: string; inserted: boolean }> }>(
    `WITH x AS (
       SELECT * FROM jsonb_to_recordset(?::jsonb) AS x(geofence_id uuid, device_id text, event text, distance_km float8,
              latitude float8, longitude float8, gps_point_id uuid, occurred_at timestamptz)
        WHERE EXISTS (SELECT 1 FROM geofences g WHERE g.id = x.geofence_id)
     ), ins AS (
       INSERT INTO geofence_events (geofence_id, device_id, event, distance_km, latitude, longitude, gps_point_id, occurred_at)
       SELECT geofence_id, device_id, event, distance_km, latitude, longitude, gps_point_id, occurred_at FROM x
       ON CONFLICT (geofence_id, gps_point_id) DO NOTHING
       RETURNING geofence_id, gps_point_id
     )
     SELECT x.geofence_id, x.gps_point_id, ins.gps_point_id IS NOT NULL AS inserted
       FROM x LEFT JOIN ins ON ins.geofence_id = x.geofence_id AND ins.gps_point_id = x.gps_point_id`,
    [
      JSON.stringify(
        entries.map((e) => ({
          geofence_id: e.data.geofence_id,
          device_id: e.data.device_id,
          event: e.data.event,
          distance_km: e.data.distance_km,
          latitude: e.latitude,
          longitude: e.longitude,
          gps_point_id: e.gpsPointId,
          occurred_at: e.occurredAt,
        })),
      ),
    ],
  );
  const live = new Set<string>();
  const inserted = new Set<string>();
  for (const r of rows) {
    live.add(`${r.geofence_id}|${r.gps_point_id}`);
    if (r.inserted) inserted.add(`${r.geofence_id}|${r.gps_point_id}`);
  }
  return { live, inserted };
}

const unrecordedKey = (config: Pick<Config, 'redisPrefix'>) => redisKey(config, RedisKeys.geofenceUnrecorded);

/**
 * Records and publishes the transitions releases before this one kept in a list when their
 * recording failed (RedisKeys.geofenceUnrecorded), oldest first, during a rolling upgrade: each is
 * published when this writes its row (a row already there was published by whoever wrote it).
 */
async function recordKept(deps: EvaluateDeps): Promise<GeofenceEventData[]> {
  const kept = await deps.redis.lpop(unrecordedKey(deps.config), UNRECORDED_CHUNK);
  if (!kept?.length) return [];
  const entries = kept.map((raw) => JSON.parse(raw) as Entry);
  try {
    const { inserted } = await writeEvents(deps, entries);
    const events = entries.filter((e) => inserted.has(eventKey(e))).map((e) => e.data);
    const pushes: Array<{ channel: string; message: ServerPush }> = [];
    for (const data of events) {
      const message: ServerPush = { type: 'geofenceEvent', data };
      pushes.push({ channel: 'geofence', message }, { channel: `geofence:${data.geofence_id}`, message });
    }
    await deps.bus.publishMany(pushes);
    return events;
  } catch (err) {
    // Back at the head, in order, for the next evaluation.
    await deps.redis.lpush(unrecordedKey(deps.config), ...kept.reverse());
    throw err;
  }
}
