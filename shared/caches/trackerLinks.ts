import type { Knex } from 'knex';
import type { Principal } from '../policies';
import { turnBatcherByDb } from '../rowLoader';

/** What a tracker's API key is linked to: its device and that device's active GPS-logging trip. */
export interface TrackerLink {
  deviceId: string;
  tripId: string | null;
  /** When that trip started (epoch ms; null without a trip or a start). */
  tripStartedAt: number | null;
}

/**
 * How long before its trip's start a tracker's point may be dated and still join the trip: the
 * tracker's clock and the server's need not agree to the second. A point dated earlier (a position
 * a tracker buffered before the trip, or `timestamp: 0` from one without a fix) is stored on the
 * device without the trip: it happened before the trip, and made the trip 57 years long.
 */
export const TRIP_START_TOLERANCE_MS = 60_000;

/** The trip a tracker's point dated `timestampMs` joins: the link's active trip, unless the point is from before it. */
export function tripOfTrackerPoint(link: TrackerLink, timestampMs: number): string | null {
  if (link.tripId === null) return null;
  if (link.tripStartedAt !== null && timestampMs < link.tripStartedAt - TRIP_START_TOLERANCE_MS) return null;
  return link.tripId;
}

/** Upper bound on how long a link is trusted without an invalidation (the credential cache's TTL is 60 s). */
const LINK_TTL_MS = 30_000;

/**
 * Links are cached per resolved credential object. The credential cache hands out the same
 * principal object until the key's entry is invalidated (`invalidateCredentials({apiKeyId})`, which
 * reaches every api instance), so dropping the credential also drops its link: no extra pub/sub
 * channel, and no query per GPS point on the hot path.
 */
const links = new WeakMap<object, { link: Promise<TrackerLink | null>; at: number }>();

/**
 * The tracker link of an API-key caller (null for every other caller and for unlinked keys).
 * Concurrent first requests of one key share one lookup: without that, a fleet's burst sent one
 * query per request until the first answered, and those queries queued behind each other on the
 * pool long enough for the next burst to miss too.
 */
export function trackerLinkFor(db: Knex, principal: Principal): Promise<TrackerLink | null> {
  if (principal.kind !== 'apiKey') return Promise.resolve(null);
  const cached = links.get(principal);
  const now = Date.now();
  if (cached && now - cached.at < LINK_TTL_MS) return cached.link;
  const link = lookUp(db, principal.apiKeyId);
  const entry = { link, at: now };
  links.set(principal, entry);
  // A failed lookup is not remembered: the next request tries again.
  link.catch(() => {
    if (links.get(principal) === entry) links.delete(principal);
  });
  return link;
}

/**
 * The links of a turn's keys, one statement: a fleet reconnecting after a restart asks for
 * thousands at once. A key links at most one device (devices.api_key_id is unique).
 */
const linksInTurn = turnBatcherByDb<TrackerLink>(async (db, apiKeyIds) => {
  const rows: Array<{ api_key_id: string; device_id: string; trip_id: string | null; started_at: Date | null }> =
    await db('devices as d')
      .leftJoin('trips as t', function joinActiveTrip() {
        this.on('t.device_id', 'd.id')
          .andOn('t.gps_logging_enabled', db.raw('true'))
          .andOn('t.status', db.raw("'active'"));
      })
      .whereRaw('d.api_key_id = ANY(?::uuid[])', [apiKeyIds])
      .select('d.api_key_id', 'd.id as device_id', 't.id as trip_id', 't.started_at');
  const out = new Map<string, TrackerLink>();
  for (const r of rows)
    if (!out.has(r.api_key_id))
      out.set(r.api_key_id, {
        deviceId: r.device_id,
        tripId: r.trip_id ?? null,
        tripStartedAt: r.trip_id && r.started_at ? new Date(r.started_at).getTime() : null,
      });
  return out;
});

async function lookUp(db: Knex, apiKeyId: string): Promise<TrackerLink | null> {
  return (await linksInTurn(db, apiKeyId.toLowerCase())) ?? null;
}
