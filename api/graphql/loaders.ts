import DataLoader from 'dataloader';
import type { Knex } from 'knex';
import type { LocationContact } from '../../shared/models/LocationContact';
import type { TripStatusHistory } from '../../shared/models/TripStatusHistory';
import type { GpsPointRow } from '../../shared/presenters/gpsPoint';
import { contactsOfLocations, historyOfTrips, pointsOfTrips } from '../../shared/queries/trackingBatches';

/** One page of a trip's points: `first + 1` rows were read, so `hasNextPage` is known without a count. */
export interface PointsPage {
  rows: GpsPointRow[];
  hasNextPage: boolean;
}

interface PointsKey {
  tripId: string;
  first: number;
  after: string | null;
}

/**
 * Per-request DataLoaders of the nested fields (trip points and history, location contacts): every
 * parent of a list asks in the same tick, and one statement answers them all (N+1-free). Made per
 * request so nothing is cached across callers.
 */
export function createLoaders(db: Knex) {
  return {
    tripPoints: new DataLoader<PointsKey, PointsPage, string>(
      async (keys) => {
        // One statement per distinct (first, after): in a list every trip asks with the same arguments.
        const groups = new Map<string, PointsKey[]>();
        for (const k of keys) {
          const g = `${k.first}:${k.after ?? ''}`;
          groups.set(g, [...(groups.get(g) ?? []), k]);
        }
        const pages = new Map<string, PointsPage>();
        for (const group of groups.values()) {
          const { first, after } = group[0];
          const byTrip = await pointsOfTrips(db, [...new Set(group.map((k) => k.tripId))], first, after);
          for (const k of group) {
            const rows = byTrip.get(k.tripId) ?? [];
            pages.set(pointsKey(k), { rows: rows.slice(0, first), hasNextPage: rows.length > first });
          }
        }
        return keys.map((k) => pages.get(pointsKey(k))!);
      },
      { cacheKeyFn: pointsKey },
    ),
    tripHistory: new DataLoader<string, TripStatusHistory[]>(async (ids) => {
      const byTrip = await historyOfTrips(db, ids);
      return ids.map((id) => byTrip.get(id) ?? []);
    }),
    locationContacts: new DataLoader<string, LocationContact[]>(async (ids) => {
      const byLocation = await contactsOfLocations(db, ids);
      return ids.map((id) => byLocation.get(id) ?? []);
    }),
  };
}

export type GqlLoaders = ReturnType<typeof createLoaders>;

const pointsKey = (k: PointsKey) => `${k.tripId}:${k.first}:${k.after ?? ''}`;
