import { XMLBuilder } from 'fast-xml-parser';
import type { Trip } from '../models/Trip';
import type { GpsPointRow } from '../presenters/gpsPoint';
import type { TripStats } from '../presenters/trip';

export const GPX_CONTENT_TYPE = 'application/gpx+xml';

/** Our metadata extension namespace (distance and duration of the trip). */
const TRIP_NS = 'urn:tracking-platform:gpx:trip:1';
/** Garmin's TrackPointExtension v2: the de-facto standard for speed (m/s) and course in GPX 1.1. */
const TPX_NS = 'http://www.garmin.com/xmlschemas/TrackPointExtension/v2';

const builder = new XMLBuilder({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  format: true,
  suppressEmptyNode: true,
});

/** Drops null/undefined members, so absent values produce no element (GPX has no nil). */
function compact<T extends Record<string, unknown>>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined)) as Partial<T>;
}

/**
 * The trip's track as a GPX 1.1 document: metadata (name, description, time, tags as keywords,
 * bounds, distance_km and duration_seconds as extensions) and one track segment with the points in
 * timestamp order (elevation, time, DOP values, speed and course).
 */
export function buildTripGpx(trip: Trip, points: GpsPointRow[], stats: TripStats, now = new Date()): string {
  let bounds: Record<string, number> | undefined;
  if (points.length) {
    const lats = points.map((p) => p.latitude);
    const lons = points.map((p) => p.longitude);
    bounds = {
      '@_minlat': Math.min(...lats),
      '@_minlon': Math.min(...lons),
      '@_maxlat': Math.max(...lats),
      '@_maxlon': Math.max(...lons),
    };
  }
  const trkpt = points.map((p) =>
    compact({
      '@_lat': p.latitude,
      '@_lon': p.longitude,
      ele: p.altitude,
      time: p.timestamp.toISOString(),
      hdop: p.hdop,
      vdop: p.vdop,
      pdop: p.pdop,
      extensions: {
        'gpxtpx:TrackPointExtension': compact({ 'gpxtpx:speed': p.speed_mps, 'gpxtpx:course': p.heading }),
      },
    }),
  );
  const doc = {
    '?xml': { '@_version': '1.0', '@_encoding': 'UTF-8' },
    gpx: {
      '@_version': '1.1',
      '@_creator': 'tracking-platform',
      '@_xmlns': 'http://www.topografix.com/GPX/1/1',
      '@_xmlns:xsi': 'http://www.w3.org/2001/XMLSchema-instance',
      '@_xsi:schemaLocation': 'http://www.topografix.com/GPX/1/1 http://www.topografix.com/GPX/1/1/gpx.xsd',
      '@_xmlns:gpxtpx': TPX_NS,
      '@_xmlns:trip': TRIP_NS,
      metadata: compact({
        name: trip.name,
        desc: trip.description,
        time: now.toISOString(),
        keywords: trip.tags?.length ? trip.tags.join(', ') : null,
        bounds,
        extensions: {
          'trip:id': trip.id,
          'trip:status': trip.status,
          'trip:distance_km': stats.distance_km,
          'trip:duration_seconds': stats.duration_seconds,
        },
      }),
      trk: compact({ name: trip.name, desc: trip.description, trkseg: { trkpt } }),
    },
  };
  return builder.build(doc) as string;
}
