import test from 'ava';
import { XMLBuilder } from 'fast-xml-parser';
import { buildTripGpx, buildTripGpxYielding, GPX_POINTS_PER_TURN } from '../../shared/domain/gpx';
import type { Trip } from '../../shared/models/Trip';
import type { GpsPointRow } from '../../shared/presenters/gpsPoint';
import type { TripStats } from '../../shared/presenters/trip';

/**
 * shared/domain/gpx.ts writes GPX directly; it must write what fast-xml-parser's builder writes for
 * the same trip (the document the API answered before, kept here as the reference).
 */
const builder = new XMLBuilder({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  format: true,
  suppressEmptyNode: true,
});
const compact = <T extends Record<string, unknown>>(o: T) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined));

function referenceGpx(trip: Trip, points: GpsPointRow[], stats: TripStats, now: Date): string {
  const lats = points.map((p) => p.latitude);
  const lons = points.map((p) => p.longitude);
  const bounds = points.length
    ? {
        '@_minlat': Math.min(...lats),
        '@_minlon': Math.min(...lons),
        '@_maxlat': Math.max(...lats),
        '@_maxlon': Math.max(...lons),
      }
    : undefined;
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
  return builder.build({
    '?xml': { '@_version': '1.0', '@_encoding': 'UTF-8' },
    gpx: {
      '@_version': '1.1',
      '@_creator': 'tracking-platform',
      '@_xmlns': 'http://www.topografix.com/GPX/1/1',
      '@_xmlns:xsi': 'http://www.w3.org/2001/XMLSchema-instance',
      '@_xsi:schemaLocation': 'http://www.topografix.com/GPX/1/1 http://www.topografix.com/GPX/1/1/gpx.xsd',
      '@_xmlns:gpxtpx': 'http://www.garmin.com/xmlschemas/TrackPointExtension/v2',
      '@_xmlns:trip': 'urn:tracking-platform:gpx:trip:1',
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
  }) as string;
}

/** A small deterministic generator (mulberry32), so a failure names a case that can be replayed. */
function rng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test('the direct writer answers what the XML builder answered, on 500 generated trips', (t) => {
  const texts = ['', 'Elbe & Havel', '<b>"quoted"</b>', "it's", 'Überführung ∑ 🚤', 'plain', ' spaced  ', 'a\nb'];
  const differing: number[] = [];
  let first: { seed: number; ours: string; reference: string } | undefined;
  // (Numbers JavaScript writes with an exponent are written plainly now: the test below.)
  const numbers = [0, -0, 1, -1, 52.5200066, 13.404954, -33.8688, 151.2093, 0.0001, 359.9, 12.5];
  for (let seed = 1; seed <= 500; seed++) {
    const r = rng(seed);
    const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)];
    const maybe = <T>(v: T) => (r() < 0.3 ? null : v);
    const trip = {
      id: `trip-${seed}`,
      name: pick(texts),
      description: r() < 0.3 ? null : pick(texts),
      tags: r() < 0.2 ? null : r() < 0.3 ? [] : [pick(texts), pick(texts)].slice(0, 1 + Math.floor(r() * 2)),
      status: pick(['draft', 'active', 'completed']),
    } as unknown as Trip;
    const points = Array.from({ length: Math.floor(r() * 12) }, (_, i) => ({
      latitude: pick(numbers),
      longitude: pick(numbers),
      altitude: maybe(pick(numbers)),
      timestamp: new Date(Date.UTC(2026, 0, 1) + i * 1000),
      hdop: maybe(pick(numbers)),
      vdop: maybe(pick(numbers)),
      pdop: maybe(pick(numbers)),
      speed_mps: maybe(pick(numbers)),
      heading: maybe(pick(numbers)),
    })) as unknown as GpsPointRow[];
    const stats = { distance_km: pick(numbers), duration_seconds: Math.floor(r() * 1e5) };
    const now = new Date(Date.UTC(2026, 10, 27, 12));
    const ours = buildTripGpx(trip, points, stats, now);
    const reference = referenceGpx(trip, points, stats, now);
    if (ours !== reference) {
      differing.push(seed);
      first ??= { seed, ours, reference };
    }
  }
  if (first) t.is(first.ours, first.reference, `seed ${first.seed}`);
  t.deepEqual(differing, []);
});

test('numbers are plain decimals (xsd:decimal has no exponent) and text holds only what XML 1.0 allows', (t) => {
  const trip = {
    id: 'trip-x',
    name: 'a\u0001b\u000bc\u001fd',
    description: 'tab\tnewline\ncr\r ok \uFFFF',
    tags: ['x\u0008y'],
    status: 'completed',
  } as unknown as Trip;
  const points = [
    {
      latitude: 1e-7,
      longitude: -5e-7,
      altitude: 1e21,
      hdop: 1e-7,
      vdop: null,
      pdop: null,
      speed_mps: 2.5e-8,
      heading: null,
    },
  ].map((p, i) => ({ ...p, timestamp: new Date(Date.UTC(2026, 0, 1) + i * 1000) })) as unknown as GpsPointRow[];
  const gpx = buildTripGpx(
    trip,
    points,
    { distance_km: 1.5e-9, duration_seconds: 0 },
    new Date(Date.UTC(2026, 10, 27)),
  );
  t.notRegex(gpx, /\d[eE][-+]?\d/, 'no number in exponent form');
  t.regex(gpx, /<trkpt lat="0\.0000001" lon="-0\.0000005">/);
  t.regex(gpx, /<ele>1000000000000000000000<\/ele>/);
  t.regex(gpx, /<hdop>0\.0000001<\/hdop>/);
  // No character XML 1.0 forbids; each became U+FFFD, and tab, newline and carriage return stay.
  // eslint-disable-next-line no-control-regex -- matching those characters is the point
  t.notRegex(gpx, /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/);
  t.true(gpx.includes('<name>a\uFFFDb\uFFFDc\uFFFDd</name>'));
  t.true(gpx.includes('tab\tnewline\ncr\r ok \uFFFD'));
  t.true(gpx.includes('x\uFFFDy'));
});

test('a long track is built in turns: the event loop runs between them, and the bytes are the same', async (t) => {
  const trip = {
    id: 'trip-long',
    name: 'long',
    description: null,
    tags: ['a'],
    status: 'completed',
  } as unknown as Trip;
  const n = GPX_POINTS_PER_TURN * 4 + 17;
  const points = Array.from({ length: n }, (_, i) => ({
    latitude: 52 + i * 1e-5,
    longitude: i % 3 ? 13 - i * 1e-5 : -0,
    altitude: i % 5 ? i / 10 : null,
    timestamp: new Date(Date.UTC(2026, 0, 1) + i * 1000),
    hdop: 0.9,
    vdop: null,
    pdop: i % 2 ? 1.2 : null,
    speed_mps: i % 7 ? 3.5 : null,
    heading: i % 11 ? i % 360 : null,
  })) as unknown as GpsPointRow[];
  const stats = { distance_km: 12.5, duration_seconds: n };
  const now = new Date(Date.UTC(2026, 11, 1));
  // Turns of the event loop while the document is built: one between each two turns of points.
  let turns = 0;
  let running = true;
  const tick = () => {
    if (!running) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  const yielding = await buildTripGpxYielding(trip, points, stats, now);
  running = false;
  t.true(turns >= 4, `${turns} turns while ${n} points were built`);
  t.is(yielding, buildTripGpx(trip, points, stats, now));
  // A short track is built at once, the same bytes too.
  const short = points.slice(0, 3);
  t.is(await buildTripGpxYielding(trip, short, stats, now), buildTripGpx(trip, short, stats, now));
  t.is(await buildTripGpxYielding(trip, [], stats, now), buildTripGpx(trip, [], stats, now));
});
