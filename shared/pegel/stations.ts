import { haversineKm } from '../geo';
import type { UpstreamStation } from './client';

/** Water-level station (spec §2), as cached and served; distance_km is added on nearest lookups. */
export interface WaterLevelStation {
  station_id: string;
  shortname: string;
  longname: string;
  water_shortname: string | null;
  water_longname: string | null;
  latitude: number;
  longitude: number;
  km: number | null;
  agency: string | null;
  level_cm: number;
  trend: number;
}

/** The water level (`W`) timeseries' current measurement of a station, if any. */
function waterLevel(s: UpstreamStation) {
  return s.timeseries?.find((t) => t.shortname === 'W')?.currentMeasurement;
}

/** The current water level (cm) of a station, when it has a W timeseries with a measurement. */
function currentLevel(s: UpstreamStation): number | undefined {
  const v = waterLevel(s)?.value;
  return typeof v === 'number' ? v : undefined;
}

/**
 * Maps an upstream station to spec §2; undefined for a station the service does not list: one
 * without a current water level (W) or without coordinates. level_cm is the W timeseries' current
 * value; trend is the measurement's own trend (-1, 0, 1) when it gives one, else the sign of the
 * change since `previousLevel` (the level seen at the previous fetch), else 0.
 */
export function mapStation(s: UpstreamStation, previousLevel?: number): WaterLevelStation | undefined {
  const m = waterLevel(s);
  const level = currentLevel(s);
  if (level === undefined || typeof s.latitude !== 'number' || typeof s.longitude !== 'number') return undefined;
  let trend = 0;
  if (typeof m?.trend === 'number' && [-1, 0, 1].includes(m.trend)) trend = m.trend;
  else if (previousLevel !== undefined) trend = Math.sign(level - previousLevel);
  return {
    station_id: s.uuid,
    shortname: s.shortname,
    longname: s.longname ?? s.shortname,
    water_shortname: s.water?.shortname ?? null,
    water_longname: s.water?.longname ?? s.water?.shortname ?? null,
    latitude: s.latitude,
    longitude: s.longitude,
    km: s.km ?? null,
    agency: s.agency ?? null,
    level_cm: level,
    trend,
  };
}

/** Lists filtered by water, per cached list (which is shared and never changed), by water in upper case. */
const byWater = new WeakMap<readonly WaterLevelStation[], Map<string, WaterLevelStation[]>>();
/** Filtered lists kept per cached list: waters asked for are few, but any text is a valid ask. */
const MAX_WATERS_KEPT = 64;

/**
 * Stations on `water` (short name, case-insensitive); all when no water is given. The result is
 * shared by every caller with the same list and water: read it, never change it.
 */
export function onWater(stations: WaterLevelStation[], water?: string): WaterLevelStation[] {
  if (!water) return stations;
  const w = water.toUpperCase();
  let kept = byWater.get(stations);
  if (!kept) byWater.set(stations, (kept = new Map()));
  let list = kept.get(w);
  if (!list) {
    list = stations.filter((s) => s.water_shortname?.toUpperCase() === w);
    if (kept.size < MAX_WATERS_KEPT) kept.set(w, list);
  }
  return list;
}

/** Per shared station list: each station's latitude in radians and its cosine. */
const trig = new WeakMap<readonly WaterLevelStation[], Float64Array>();
const rad = (deg: number) => (deg * Math.PI) / 180;

/**
 * The station closest to a position (haversine), optionally within `radiusKm`; undefined when none
 * qualifies. The distance is monotonic in the haversine's inner term `a`, so the search compares
 * `a` (with each station's cosine computed once per list) and takes the distance of the winner
 * only, by `haversineKm` itself: the same station and figure as computing every distance.
 */
export function nearestStation(
  stations: WaterLevelStation[],
  lat: number,
  lon: number,
  radiusKm?: number,
): (WaterLevelStation & { distance_km: number }) | undefined {
  let cos = trig.get(stations);
  if (!cos) {
    cos = new Float64Array(stations.length);
    for (let i = 0; i < stations.length; i++) cos[i] = Math.cos(rad(stations[i].latitude));
    trig.set(stations, cos);
  }
  const cosLat = Math.cos(rad(lat));
  let best = -1;
  let bestA = Infinity;
  for (let i = 0; i < stations.length; i++) {
    const s = stations[i];
    const dLat = rad(s.latitude - lat);
    const dLon = rad(s.longitude - lon);
    const a = Math.sin(dLat / 2) ** 2 + cosLat * cos[i] * Math.sin(dLon / 2) ** 2;
    if (a < bestA) [best, bestA] = [i, a];
  }
  if (best < 0) return undefined;
  const d = haversineKm(lat, lon, stations[best].latitude, stations[best].longitude);
  if (radiusKm !== undefined && d > radiusKm) return undefined;
  return { ...stations[best], distance_km: Math.round(d * 1000) / 1000 };
}
