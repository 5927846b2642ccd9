import type { Knex } from 'knex';
import type Redis from 'ioredis';
import { forgetLatestGps, recordLatestGps } from '../caches/gpsLatest';
import { trackerLinkFor } from '../caches/trackerLinks';
import type { Config } from '../config';
import { badRequest, toHttpError } from '../errors';
import { GroupCommit } from '../groupCommit';
import type { Logger } from '../logger';
import type { OutboxRelay } from '../outbox';
import type { Principal } from '../policies';
import type { RedisErrorLog } from '../redis';
import { GpsBatchRejection, GpsBatchResult, GpsPoint, GpsPointRow, presentGpsPoint } from '../presenters/gpsPoint';
import { existingTripIds } from '../queries/references';
import { GpsPointInput, insertGpsRows, NewGpsRow, toGpsRow } from './gpsInsert';

/** What ingestion needs from a process: database, cache, and the side-effect relay to wake. */
export interface IngestDeps {
  db: Knex;
  redis: Redis;
  config: Pick<Config, 'redisPrefix'>;
  logger: Logger;
  outbox: Pick<OutboxRelay, 'wake'>;
  /** The process's log of Redis errors: a failure per request is folded there, not logged each time. */
  redisErrors?: Pick<RedisErrorLog, 'listener'>;
}

/**
 * After the insert has committed: wake the side-effect relay (the statement also wrote the points'
 * outbox row: gpsUpdate pushes and geofence evaluation happen from there, also after a Redis
 * outage), and raise the latest-point cache, awaited so `current` is never staler than the answer.
 * A cache that cannot be raised is dropped; with Redis down neither works and `current` reads the
 * database until the relay raises the cache once Redis is back.
 */
async function afterGpsInsert(deps: IngestDeps, rows: GpsPointRow[]): Promise<void> {
  deps.outbox.wake();
  try {
    await recordLatestGps(deps.db, deps.redis, deps.config, rows);
  } catch (err) {
    // A cache we could not raise must not keep serving an older point as the latest. During an
    // outage every request gets here: the message is folded with the other Redis errors.
    if (deps.redisErrors) deps.redisErrors.listener('latest GPS cache')(err as Error);
    else deps.logger.warn({ err: (err as Error).message }, 'could not update the latest GPS cache');
    await forgetLatestGps(
      deps.redis,
      deps.config,
      rows.map((r) => r.device_id),
    ).catch(() => undefined);
  }
}

/** A batch fails because of one of its points only for a client error (a constraint, a bad value). */
const pointMayBeAtFault = (err: unknown) => (toHttpError(err)?.status ?? 500) < 500;

/** The group commit of single points, one per process (its services object). */
const pointCommits = new WeakMap<IngestDeps, GroupCommit<NewGpsRow, GpsPointRow>>();

function pointCommit(deps: IngestDeps): GroupCommit<NewGpsRow, GpsPointRow> {
  let commit = pointCommits.get(deps);
  if (!commit) {
    commit = new GroupCommit<NewGpsRow, GpsPointRow>({
      // The batch's points share one outbox row, in submission order. The cache step after the
      // commit does not throw, so a failure here means nothing was written.
      flush: async (rows) => {
        const inserted = await insertGpsRows(deps.db, rows);
        await afterGpsInsert(deps, inserted);
        return inserted;
      },
      isolate: pointMayBeAtFault,
    });
    pointCommits.set(deps, commit);
  }
  return commit;
}

/**
 * Ingests one validated point for `principal` (POST /v1/gps). The points of concurrent requests
 * share one INSERT and one commit (`GroupCommit`); each request still gets its own row, after the
 * commit, or the error its point alone would have caused.
 */
export async function ingestGpsPoint(deps: IngestDeps, principal: Principal, input: GpsPointInput): Promise<GpsPoint> {
  const link = await trackerLinkFor(deps.db, principal);
  const row = toGpsRow(input, link);
  if (row.trip_id && !link && !(await existingTripIds(deps.db, [row.trip_id])).has(row.trip_id)) {
    throw badRequest('trip_id: no such trip');
  }
  return presentGpsPoint(await pointCommit(deps).submit(row));
}

/** A batch as validated point by point at the edge: the valid points by index, and the rejected ones. */
export interface GpsBatchInput {
  valid: Array<{ index: number; point: GpsPointInput }>;
  rejected: GpsBatchRejection[];
}

/**
 * Ingests the valid points of a batch in one multi-row INSERT (POST /v1/gps/batch). Points naming
 * an unknown trip join the rejected ones (by index); the others are stored.
 */
export async function ingestGpsBatch(
  deps: IngestDeps,
  principal: Principal,
  batch: GpsBatchInput,
): Promise<GpsBatchResult> {
  const link = await trackerLinkFor(deps.db, principal);
  const rejected = [...batch.rejected];
  let valid: Array<{ index: number; row: NewGpsRow }> = batch.valid.map((v) => ({
    index: v.index,
    row: toGpsRow(v.point, link),
  }));
  /** Moves the points naming a trip that does not exist (any more) to the rejected ones. */
  const rejectMissingTrips = async () => {
    const tripIds = new Set(valid.map((v) => v.row.trip_id).filter((t): t is string => !!t));
    const known = await existingTripIds(deps.db, [...tripIds]);
    const missing = valid.filter((v) => v.row.trip_id && !known.has(v.row.trip_id));
    for (const v of missing) rejected.push({ index: v.index, errors: [{ field: 'trip_id', message: 'no such trip' }] });
    valid = valid.filter((v) => !missing.includes(v));
    rejected.sort((a, b) => a.index - b.index);
  };
  if (!link) await rejectMissingTrips();
  if (valid.length === 0) return { accepted: [], rejected };
  let inserted: GpsPointRow[];
  try {
    inserted = await insertGpsRows(
      deps.db,
      valid.map((v) => v.row),
    );
  } catch (err) {
    // A trip deleted between the check and the insert: its points are rejected as if it had been
    // gone before, and the others stored (the batch's contract: a rejection per point).
    if (link || (err as { constraint?: unknown }).constraint !== 'gps_points_trip_id_foreign') throw err;
    await rejectMissingTrips();
    if (valid.length === 0) return { accepted: [], rejected };
    inserted = await insertGpsRows(
      deps.db,
      valid.map((v) => v.row),
    );
  }
  await afterGpsInsert(deps, inserted);
  return { accepted: inserted.map((row, i) => ({ index: valid[i].index, id: row.id })), rejected };
}
