import type { Knex } from 'knex';
import type { PartialModelObject } from 'objection';
import { conflict, notFound, toHttpError } from '../errors';
import { Trip, TripStatus } from '../models/Trip';
import { TripStatusHistory } from '../models/TripStatusHistory';
import { TripTemplate } from '../models/TripTemplate';
import { trackingConfig } from '../caches/trackingConfig';
import { trackerKeysOfDevices } from '../queries/trackerKeys';
import { invalidateTrackerLinks, TrackerLinkServices } from './trackerLinks';
import { afterCommit, transaction } from '../db';
import { insertGrouped } from '../groupedInsert';
import { findOr404 } from '../rowLoader';
import { forgetDeletedGps, GpsDeleteDeps } from './gpsPoints';
import { canDeleteTrip, transitionPatch } from '../domain/tripStatus';
import { deleteById, patchFound, patchLoaded } from '../models/AppModel';

/** The partial unique index of the tracking migration: one active GPS-logging trip per device. */
const ACTIVE_GPS_TRIP_INDEX = 'trips_one_active_gps_logging_per_device';

/** Fields a trip is created with (spec §4.4 POST). */
export interface TripInput {
  name: string;
  description?: string | null;
  gps_logging_enabled?: boolean;
  device_id?: string | null;
  category_id?: string | null;
  origin_id?: string | null;
  destination_id?: string | null;
  weight_kg?: number | null;
  notes?: string | null;
  tags?: string[];
}

/** PATCH /v1/trips/{id}: create fields, status, start/end coordinates, and where the change happened. */
export interface TripPatch extends Partial<TripInput> {
  status?: TripStatus;
  start_latitude?: number | null;
  start_longitude?: number | null;
  end_latitude?: number | null;
  end_longitude?: number | null;
  /** Position recorded in the status history entry (defaults to the start/end coordinates sent). */
  latitude?: number | null;
  longitude?: number | null;
}

function isActiveTripConflict(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string; nativeError?: { code?: string; constraint?: string } };
  const code = e.nativeError?.code ?? e.code;
  const constraint = e.constraint ?? e.nativeError?.constraint;
  return code === '23505' && constraint === ACTIVE_GPS_TRIP_INDEX;
}

const defined = <T extends object>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

/**
 * Creates a trip; new trips are always draft (spec §3). Unknown references are a 400 naming the
 * field (by their foreign keys). Without gps_logging_enabled the trips.default_gps_logging system
 * config applies (seeded false; the process's config cache, which a change clears at once).
 */
export async function createTrip(db: Knex, input: TripInput): Promise<Trip> {
  const gpsLogging = input.gps_logging_enabled ?? (await trackingConfig(db)).defaultGpsLogging;
  // One statement, shared with the trips created meanwhile (insertGrouped): the foreign keys check
  // the references (a missing one is a 400 naming the field, shared/errors.ts), so nothing is read before.
  return insertGrouped(Trip, db, { ...defined(input), gps_logging_enabled: gpsLogging, status: 'draft' });
}

/**
 * Applies a PATCH in one transaction with the trip row locked: references, the status machine
 * (started_at/ended_at, a history entry with the acting user and position) and the one-active-
 * GPS-logging-trip-per-device rule, which the database enforces so that concurrent activations
 * cannot both win (the loser gets 409). A status, device or logging change moves where the
 * device's tracker points go: the tracker links it made stale are dropped after the commit.
 */
export async function updateTrip(
  services: TrackerLinkServices,
  id: string,
  patch: TripPatch,
  actorUserId: string | null,
): Promise<Trip> {
  if (patch.status === undefined && patch.device_id === undefined && patch.gps_logging_enabled === undefined) {
    // Plain fields only (name, notes, references, coordinates…): nothing depends on the row as it
    // was and no tracker link moves, so one UPDATE … RETURNING, without a lock or a transaction.
    const { latitude: _lat, longitude: _lon, ...fields } = patch;
    const changes = defined(fields);
    if (Object.keys(changes).length === 0) return findOr404(Trip, id, 'trip');
    return patchFound(Trip, services.db, id, changes, 'trip');
  }
  return transaction(services.db, async (trx) => {
    const trip = await Trip.query(trx).findById(id).forUpdate();
    if (!trip) throw notFound('trip');
    const { status, latitude, longitude, ...fields } = patch;
    const changes: PartialModelObject<Trip> = defined(fields);
    let history: PartialModelObject<TripStatusHistory> | undefined;
    if (status !== undefined) {
      // The database clock at the moment the change applies (after the row lock, unlike now()), so
      // history order and started_at/ended_at follow the order in which changes really happened;
      // read once, so the change's started_at/ended_at, history entry and updated_at are one instant.
      // Read as text and sent back as the same timestamptz: a Date would keep milliseconds, and
      // history sorted by changed_at needs the microseconds.
      const { rows } = await trx.raw<{ rows: Array<{ at: string }> }>('SELECT clock_timestamp()::text AS at');
      const clock = trx.raw('?::timestamptz', [rows[0]!.at]);
      Object.assign(changes, transitionPatch(trip, status, clock), { updated_at: clock });
      const toActive = status === 'active';
      history = {
        trip_id: trip.id,
        old_status: trip.status,
        new_status: status,
        changed_by: actorUserId,
        latitude: latitude ?? (toActive ? patch.start_latitude : patch.end_latitude) ?? null,
        longitude: longitude ?? (toActive ? patch.start_longitude : patch.end_longitude) ?? null,
        changed_at: clock,
      };
    }
    if (Object.keys(changes).length === 0) return trip;

    let updated: Trip;
    try {
      updated = await patchLoaded(trip, trx, changes, 'trip');
    } catch (err) {
      if (isActiveTripConflict(err)) {
        throw conflict(
          `another active trip with GPS logging already runs on device ${patch.device_id ?? trip.device_id}`,
        );
      }
      throw err;
    }
    if (history) await TripStatusHistory.query(trx).insert(history);

    const linkChanged =
      status !== undefined || changes.device_id !== undefined || changes.gps_logging_enabled !== undefined;
    if (linkChanged) {
      const trackerKeys = await trackerKeysOfDevices(trx, [trip.device_id, updated.device_id]);
      afterCommit(trx, () => invalidateTrackerLinks(services, trackerKeys));
    }
    return updated;
  });
}

/**
 * Points a trip deletion detaches per statement. Each point costs its UPDATE about 14 µs (five
 * indexes), so a batch stays far below `statement_timeout` (DATABASE_REQUEST_TIMEOUT_MS) whatever
 * the trip's length; the foreign key's ON DELETE SET NULL did it in the DELETE itself, one
 * statement that a week of points at 1 Hz took past 8 s, making such a trip undeletable.
 */
export const TRIP_DETACH_BATCH = 10_000;

/**
 * Deletes a draft or completed trip (409 while active or paused). Its GPS points stay, with trip_id
 * set to null (in batches, then the trip row: the foreign key finds nothing left to set); the
 * cached latest points of their devices, which may carry the old trip_id, are dropped after the
 * commit. The trip row stays locked throughout, so no point can join it meanwhile.
 */
export async function deleteTrip(deps: GpsDeleteDeps, id: string): Promise<void> {
  await transaction(deps.db, async (trx) => {
    const trip = await Trip.query(trx).findById(id).forUpdate();
    if (!trip) throw notFound('trip');
    if (!canDeleteTrip(trip.status))
      throw conflict(`trip is ${trip.status}: only draft or completed trips can be deleted`);
    const devices = new Set<string | null>();
    for (;;) {
      const { rows } = await trx.raw<{ rows: Array<{ device_id: string | null; n: number }> }>(
        `WITH detached AS (
           UPDATE gps_points SET trip_id = NULL
            WHERE id IN (SELECT id FROM gps_points WHERE trip_id = ? LIMIT ?)
            RETURNING device_id
         )
         SELECT device_id, count(*)::int AS n FROM detached GROUP BY device_id`,
        [id, TRIP_DETACH_BATCH],
      );
      for (const r of rows) devices.add(r.device_id);
      if (rows.reduce((n, r) => n + r.n, 0) < TRIP_DETACH_BATCH) break;
    }
    await deleteById(Trip, trx, id);
    const pointDeviceIds = [...devices];
    if (pointDeviceIds.length) afterCommit(trx, () => forgetDeletedGps(deps, pointDeviceIds));
  });
}

/** POST /v1/trip-templates/{id}/create-trip: a draft trip with the template's values and the given weight. */
export async function createTripFromTemplate(db: Knex, tpl: TripTemplate, weightKg: number): Promise<Trip> {
  const fromTemplate = (t: TripTemplate) =>
    createTrip(db, {
      name: `${t.name} (from template)`,
      description: t.description,
      gps_logging_enabled: t.gps_logging_enabled,
      device_id: t.device_id,
      category_id: t.category_id,
      origin_id: t.origin_id,
      destination_id: t.destination_id,
      weight_kg: weightKg,
      notes: t.notes,
      tags: t.tags ?? [],
    });
  try {
    return await fromTemplate(tpl);
  } catch (err) {
    // A reference of the template (category, location, device) deleted since it was read: the
    // template no longer names it (the delete cleared it there), so the trip is made from the
    // template as it is now. The client sent none of these fields; a 400 about one would be wrong.
    const refused = toHttpError(err);
    if (refused?.status !== 400 || !/no such/.test(refused.message)) throw err;
    return fromTemplate(await findOr404(TripTemplate, tpl.id, 'trip template'));
  }
}
