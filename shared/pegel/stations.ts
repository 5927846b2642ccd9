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

/** Stations on `water` (short name, case-insensitive); all when no water is given. */
export function onWater(stations: WaterLevelStation[], water?: string): WaterLevelStation[] {
  if (!water) return stations;
  const w = water.toUpperCase();
  return stations.filter((s) => s.water_shortname?.toUpperCase() === w);
}

/** The station closest to a position (haversine), optionally within `radiusKm`; undefined when none qualifies. */
export function nearestStation(
  stations: WaterLevelStation[],
  lat: number,
  lon: number,
  radiusKm?: number,
): (WaterLevelStation & { distance_km: number }) | undefined {
  let best: WaterLevelStation | undefined;
  let bestKm = Infinity;
  for (const s of stations) {
    const d = haversineKm(lat, lon, s.latitude, s.longitude);
    if (radiusKm !== undefined && d > radiusKm) continue;
    if (d < bestKm) [best, bestKm] = [s, d];
  }
  return best && { ...best, distance_km: Math.round(bestKm * 1000) / 1000 };
}
