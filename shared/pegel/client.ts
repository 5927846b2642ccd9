import { z } from '../zod';

/**
 * Client of the PEGELONLINE REST API v2 (https://www.pegelonline.wsv.de/webservices/rest-api/v2,
 * or any server speaking it, named by PEGEL_API_URL): `stations.json` with the station's timeseries
 * and their current measurement, filtered upstream by water and by a circle around a position.
 */

/** What the service asks upstream for; every field optional. */
export interface PegelQuery {
  /** Water body short name (PEGELONLINE `waters`, upper case there). */
  water?: string;
  latitude?: number;
  longitude?: number;
  /** Kilometres around latitude/longitude (PEGELONLINE `radius`). */
  radius?: number;
}

/** Thrown when upstream fails, times out or answers something that is not a station list. */
export class PegelUnavailableError extends Error {}

const measurement = z
  .object({
    timestamp: z.string().optional(),
    value: z.number().nullable().optional(),
    trend: z.number().int().nullable().optional(),
    stateMnwMhw: z.string().nullable().optional(),
    stateNswHsw: z.string().nullable().optional(),
  })
  .passthrough();

/** One station of PEGELONLINE's StationOverviewResult (fields the service uses; others pass). */
export const upstreamStationSchema = z
  .object({
    uuid: z.string(),
    number: z.string().optional(),
    shortname: z.string(),
    longname: z.string().optional(),
    km: z.number().nullable().optional(),
    agency: z.string().nullable().optional(),
    longitude: z.number().nullable().optional(),
    latitude: z.number().nullable().optional(),
    water: z.object({ shortname: z.string(), longname: z.string().optional() }).passthrough().optional(),
    timeseries: z
      .array(
        z
          .object({
            shortname: z.string(),
            unit: z.string().optional(),
            currentMeasurement: measurement.optional(),
          })
          .passthrough(),
      )
      .optional(),
  })
  .passthrough();
export type UpstreamStation = z.infer<typeof upstreamStationSchema>;

/** The stations.json URL for a query (includeTimeseries and includeCurrentMeasurement always on). */
export function stationsUrl(baseUrl: string, q: PegelQuery): string {
  const url = new URL(`${baseUrl.replace(/\/+$/, '')}/stations.json`);
  url.searchParams.set('includeTimeseries', 'true');
  url.searchParams.set('includeCurrentMeasurement', 'true');
  if (q.water) url.searchParams.set('waters', q.water);
  if (q.latitude !== undefined && q.longitude !== undefined && q.radius !== undefined) {
    url.searchParams.set('latitude', String(q.latitude));
    url.searchParams.set('longitude', String(q.longitude));
    url.searchParams.set('radius', String(q.radius));
  }
  return url.toString();
}

/**
 * Fetches the stations of a query, giving up after `timeoutMs` (PegelUnavailableError on a
 * timeout, a non-2xx answer or a body that is not a station array). Stations that do not parse are
 * skipped rather than failing the whole answer; an answer of which none parses is malformed (it
 * would otherwise be kept as a valid empty list, over the good answer kept for outages).
 */
export async function fetchStations(baseUrl: string, q: PegelQuery, timeoutMs: number): Promise<UpstreamStation[]> {
  let body: unknown;
  try {
    const res = await fetch(stationsUrl(baseUrl, q), {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      throw new PegelUnavailableError(`upstream answered ${res.status}`);
    }
    body = await res.json();
  } catch (err) {
    if (err instanceof PegelUnavailableError) throw err;
    const e = err as Error;
    const what = e.name === 'TimeoutError' || e.name === 'AbortError' ? `no answer within ${timeoutMs} ms` : e.message;
    throw new PegelUnavailableError(`upstream request failed: ${what}`);
  }
  if (!Array.isArray(body)) throw new PegelUnavailableError('upstream answer is not a station list');
  const stations: UpstreamStation[] = [];
  for (const item of body) {
    const parsed = upstreamStationSchema.safeParse(item);
    if (parsed.success) stations.push(parsed.data);
  }
  if (body.length > 0 && stations.length === 0)
    throw new PegelUnavailableError('upstream answer holds no station in the expected format');
  return stations;
}
