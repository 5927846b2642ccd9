import type { WaterLevelStation } from '../pegel/stations';
import { z } from '../zod';

/** Water-level station (spec §2). */
export const waterLevelStationSchema = z
  .object({
    station_id: z.string().describe('PEGELONLINE station uuid'),
    shortname: z.string(),
    longname: z.string(),
    water_shortname: z.string().nullable(),
    water_longname: z.string().nullable(),
    latitude: z.number(),
    longitude: z.number(),
    km: z.number().nullable().describe('River kilometre'),
    agency: z.string().nullable(),
    level_cm: z.number().describe('Current value of the W (water level) timeseries, in cm'),
    trend: z.number().int().describe('-1 falling, 0 steady or unknown, 1 rising'),
  })
  .openapi('WaterLevelStation');

export const nearestStationSchema = waterLevelStationSchema
  .extend({ distance_km: z.number().describe('Haversine distance from the position searched from') })
  .openapi('NearestWaterLevelStation');

/** A station as the API shows it (the cache holds them already mapped; this fixes the field set). */
export function presentWaterLevelStation(s: WaterLevelStation): z.infer<typeof waterLevelStationSchema> {
  return {
    station_id: s.station_id,
    shortname: s.shortname,
    longname: s.longname,
    water_shortname: s.water_shortname,
    water_longname: s.water_longname,
    latitude: s.latitude,
    longitude: s.longitude,
    km: s.km,
    agency: s.agency,
    level_cm: s.level_cm,
    trend: s.trend,
  };
}

/** The nearest station with its distance. */
export function presentNearestStation(
  s: WaterLevelStation & { distance_km: number },
): z.infer<typeof nearestStationSchema> {
  return { ...presentWaterLevelStation(s), distance_km: s.distance_km };
}
