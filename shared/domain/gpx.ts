import type { Trip } from '../models/Trip';
import { isoString } from '../presenters/iso';
import type { TripStats } from '../presenters/trip';
import type { TrackPoint } from '../queries/gpsPoints';

export const GPX_CONTENT_TYPE = 'application/gpx+xml';

/** Our metadata extension namespace (distance and duration of the trip). */
const TRIP_NS = 'urn:tracking-platform:gpx:trip:1';
/** Garmin's TrackPointExtension v2: the de-facto standard for speed (m/s) and course in GPX 1.1. */
const TPX_NS = 'http://www.garmin.com/xmlschemas/TrackPointExtension/v2';

const HEAD =
  '<?xml version="1.0" encoding="UTF-8"?>\n' +
  `<gpx version="1.1" creator="tracking-platform" xmlns="http://www.topografix.com/GPX/1/1" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://www.topografix.com/GPX/1/1 http://www.topografix.com/GPX/1/1/gpx.xsd" xmlns:gpxtpx="${TPX_NS}" xmlns:trip="${TRIP_NS}">\n`;

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', "'": '&apos;', '"': '&quot;' };
/**
 * Text and attribute values: the five XML entities, and U+FFFD for what XML 1.0 cannot hold even
 * escaped (C0 controls other than tab, newline and carriage return; U+FFFE, U+FFFF), which trip
 * names and notes may contain: one of them made the whole file unreadable to every GPX consumer.
 */
const escape = (s: string) =>
  // eslint-disable-next-line no-control-regex -- matching those characters is the point
  s.replace(/[&<>'"\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g, (c) => ENTITIES[c] ?? '\uFFFD');
/**
 * A number as text, in plain decimal notation (GPX's coordinates, elevation and DOP values are
 * xsd:decimal, which has no exponent: 1e-7 is written 0.0000001, with every digit JavaScript gives);
 * negative zero keeps its sign, as a coordinate may.
 */
const num = (n: number) => {
  if (Object.is(n, -0)) return '-0';
  const text = String(n);
  const m = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(text);
  if (!m) return text;
  const [, sign, int, frac = '', exp] = m;
  const e = Number(exp);
  // String() uses an exponent only below 1e-6 and from 1e21, where the fraction is shorter than e.
  return e < 0 ? `${sign}0.${'0'.repeat(-e - 1)}${int}${frac}` : `${sign}${int}${frac}${'0'.repeat(e - frac.length)}`;
};

/** `<tag>text</tag>` on its own line, `<tag/>` when the text is empty; nothing for null. */
function element(indent: string, tag: string, text: string | null | undefined): string {
  if (text === null || text === undefined) return '';
  return text === '' ? `${indent}<${tag}/>\n` : `${indent}<${tag}>${text}</${tag}>\n`;
}
const numberElement = (indent: string, tag: string, n: number | null | undefined) =>
  n === null || n === undefined ? '' : `${indent}<${tag}>${num(n)}</${tag}>\n`;

/**
 * The trip's track as a GPX 1.1 document: metadata (name, description, time, tags as keywords,
 * bounds, distance_km and duration_seconds as extensions) and one track segment with the points in
 * timestamp order (elevation, time, DOP values, speed and course). Absent values produce no element
 * (GPX has no nil); an empty text is an empty element.
 *
 * Timestamps through isoString (shared/presenters/iso.ts). Written directly rather than through an XML builder's object tree: fast-xml-parser's builder took
 * about 10 µs per point (1 ms for 100, most of a GET /v1/trips/{id}/gpx), and the event loop is
 * blocked while a document is built, so a day's track at one point per second held every other
 * request for most of a second. The output is the builder's, byte for byte (indentation, entities,
 * empty elements): test/tracking/gpx.test.ts compares the two on generated trips.
 */
export function buildTripGpx(trip: Trip, points: TrackPoint[], stats: TripStats, now = new Date()): string {
  const parts = [gpxHead(trip, points, stats, now)];
  for (const p of points) parts.push(trackPoint(p));
  parts.push(gpxTail(points));
  return parts.join('');
}

/** Points built between two yields to the event loop by buildTripGpxYielding. */
export const GPX_POINTS_PER_TURN = 5000;

/**
 * buildTripGpx, the same bytes, giving the event loop back every GPX_POINTS_PER_TURN points: a
 * track of 200,000 points (a week at one point every three seconds) took 1.5 s to build, and every
 * other request of the process waited that long.
 */
export async function buildTripGpxYielding(
  trip: Trip,
  points: TrackPoint[],
  stats: TripStats,
  now = new Date(),
): Promise<string> {
  if (points.length <= GPX_POINTS_PER_TURN) return buildTripGpx(trip, points, stats, now);
  const parts = [gpxHead(trip, points, stats, now)];
  for (let i = 0; i < points.length; i++) {
    if (i > 0 && i % GPX_POINTS_PER_TURN === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    parts.push(trackPoint(points[i]!));
  }
  parts.push(gpxTail(points));
  return parts.join('');
}

/** Everything before the first track point: the metadata (with the bounds of `points`) and the track's name. */
function gpxHead(trip: Trip, points: TrackPoint[], stats: TripStats, now: Date): string {
  const name = escape(trip.name);
  const desc = trip.description === null || trip.description === undefined ? null : escape(trip.description);
  let out = HEAD + '  <metadata>\n';
  out += element('    ', 'name', name);
  out += element('    ', 'desc', desc);
  out += `    <time>${isoString(now)}</time>\n`;
  if (trip.tags?.length) out += element('    ', 'keywords', escape(trip.tags.join(', ')));
  if (points.length) {
    let minLat = Infinity;
    let minLon = Infinity;
    let maxLat = -Infinity;
    let maxLon = -Infinity;
    for (const p of points) {
      // As Math.min and Math.max order them: -0 is below 0.
      if (p.latitude < minLat || (p.latitude === minLat && Object.is(p.latitude, -0))) minLat = p.latitude;
      if (p.longitude < minLon || (p.longitude === minLon && Object.is(p.longitude, -0))) minLon = p.longitude;
      if (p.latitude > maxLat || (p.latitude === maxLat && Object.is(maxLat, -0))) maxLat = p.latitude;
      if (p.longitude > maxLon || (p.longitude === maxLon && Object.is(maxLon, -0))) maxLon = p.longitude;
    }
    out += `    <bounds minlat="${num(minLat)}" minlon="${num(minLon)}" maxlat="${num(maxLat)}" maxlon="${num(maxLon)}"/>\n`;
  }
  out +=
    '    <extensions>\n' +
    element('      ', 'trip:id', escape(trip.id)) +
    element('      ', 'trip:status', escape(trip.status)) +
    numberElement('      ', 'trip:distance_km', stats.distance_km) +
    numberElement('      ', 'trip:duration_seconds', stats.duration_seconds) +
    '    </extensions>\n' +
    '  </metadata>\n' +
    '  <trk>\n';
  out += element('    ', 'name', name);
  out += element('    ', 'desc', desc);
  return points.length ? out + '    <trkseg>\n' : out;
}

/** What follows the last track point (an empty segment when there is none). */
const gpxTail = (points: TrackPoint[]) =>
  points.length ? '    </trkseg>\n  </trk>\n</gpx>\n' : '    <trkseg/>\n  </trk>\n</gpx>\n';

/** One track point: elevation, time, DOP values, speed and course. */
function trackPoint(p: TrackPoint): string {
  let pt = `      <trkpt lat="${num(p.latitude)}" lon="${num(p.longitude)}">\n`;
  pt += numberElement('        ', 'ele', p.altitude);
  pt += `        <time>${isoString(p.timestamp)}</time>\n`;
  pt += numberElement('        ', 'hdop', p.hdop);
  pt += numberElement('        ', 'vdop', p.vdop);
  pt += numberElement('        ', 'pdop', p.pdop);
  const ext =
    numberElement('            ', 'gpxtpx:speed', p.speed_mps) +
    numberElement('            ', 'gpxtpx:course', p.heading);
  return (
    pt +
    '        <extensions>\n' +
    (ext
      ? `          <gpxtpx:TrackPointExtension>\n${ext}          </gpxtpx:TrackPointExtension>\n`
      : '          <gpxtpx:TrackPointExtension/>\n') +
    '        </extensions>\n' +
    '      </trkpt>\n'
  );
}
