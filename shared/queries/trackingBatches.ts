import type { Knex } from 'knex';
import { LocationContact } from '../models/LocationContact';
import { TripStatusHistory } from '../models/TripStatusHistory';
import { GPS_POINT_COLUMNS, GpsPointRow } from '../presenters/gpsPoint';
import { compiledOnce, groupBy } from '../rowLoader';
import { byName } from './byName';

/**
 * Batched reads for lists (GraphQL's DataLoaders): each answers many parents with one statement,
 * so a page of 100 trips with their points costs the same number of statements as one trip.
 */

// The SQL of each batch read is compiled once (compiledOnce): building and compiling it through the
// query builder cost about 250 µs per batch, more than the statement's own round trip.

const contactsSql = compiledOnce((db) =>
  db(LocationContact.tableName)
    .select('*')
    .whereRaw('location_id = ANY(?)', [[]])
    .orderByRaw(byName(undefined, 'created_at')),
);

/** Location contacts of many locations, grouped by location id (each group ordered like contactsOf). */
export async function contactsOfLocations(
  db: Knex,
  locationIds: readonly string[],
): Promise<Map<string, LocationContact[]>> {
  const { rows } = await db.raw<{ rows: Array<Record<string, unknown>> }>(contactsSql(db), [locationIds as string[]]);
  return groupBy(
    rows,
    (r) => String(r.location_id),
    (r) => LocationContact.fromDatabaseJson(r) as LocationContact,
  );
}

const historySql = compiledOnce((db) =>
  db(TripStatusHistory.tableName)
    .select('*')
    .whereRaw('trip_id = ANY(?)', [[]])
    .orderBy([{ column: 'changed_at' }, { column: 'id' }]),
);

/** Status history of many trips, grouped by trip id, oldest first. */
export async function historyOfTrips(db: Knex, tripIds: readonly string[]): Promise<Map<string, TripStatusHistory[]>> {
  const { rows } = await db.raw<{ rows: Array<Record<string, unknown>> }>(historySql(db), [tripIds as string[]]);
  return groupBy(
    rows,
    (r) => String(r.trip_id),
    (r) => TripStatusHistory.fromDatabaseJson(r) as TripStatusHistory,
  );
}

/**
 * Up to `first + 1` points of each trip in track order (timestamp, insertion, id), after the point
 * `afterPointId` of that order when given: one statement for every trip, each trip's points read
 * from the track index (gps_points_trip_track) and cut at the limit there, so a page costs
 * `first + 1` points per trip however long the trips are (a window over each trip's whole track
 * read every point of it). The extra point tells the caller whether there is a next page.
 */
export async function pointsOfTrips(
  db: Knex,
  tripIds: readonly string[],
  first: number,
  afterPointId: string | null,
): Promise<Map<string, GpsPointRow[]>> {
  const cols = GPS_POINT_COLUMNS.map((c) => `g."${c}"`).join(', ');
  const after = afterPointId
    ? `AND (g."timestamp", g.created_at, g.id) > (SELECT "timestamp", created_at, id FROM gps_points WHERE id = :after)`
    : '';
  const { rows } = await db.raw<{ rows: GpsPointRow[] }>(
    `SELECT p.* FROM unnest(:ids::uuid[]) AS t(id)
     CROSS JOIN LATERAL (
       SELECT ${cols} FROM gps_points g WHERE g.trip_id = t.id ${after}
        ORDER BY g."timestamp", g.created_at, g.id LIMIT :limit) p
     ORDER BY p.trip_id, p."timestamp", p.created_at, p.id`,
    { ids: tripIds as string[], limit: first + 1, ...(afterPointId ? { after: afterPointId } : {}) },
  );
  return groupBy(rows, (r) => r.trip_id!);
}
