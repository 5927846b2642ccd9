/** Mean Earth radius (IUGG), used by every distance in the service: JS and SQL alike. */
export const EARTH_RADIUS_KM = 6371.0088;

const rad = (deg: number) => (deg * Math.PI) / 180;

/** Great-circle distance in kilometres between two WGS84 coordinates (haversine formula). */
export function haversineKm(lat1: number, lon1: number, lat2: number, lon2: number): number {
  const dLat = rad(lat2 - lat1);
  const dLon = rad(lon2 - lon1);
  const a = Math.sin(dLat / 2) ** 2 + Math.cos(rad(lat1)) * Math.cos(rad(lat2)) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_KM * Math.asin(Math.min(1, Math.sqrt(a)));
}

/**
 * The same haversine as SQL over columns/expressions `lat1, lon1, lat2, lon2` (degrees); the
 * radius is bound as the first `?`, so the SQL and JS figures agree. NULL in, NULL out (LEAST alone
 * would turn a NULL into 1, i.e. half the Earth's circumference).
 */
export function haversineSql(lat1: string, lon1: string, lat2: string, lon2: string): string {
  const a = `power(sin(radians(${lat2} - ${lat1}) / 2), 2) + cos(radians(${lat1})) * cos(radians(${lat2})) * power(sin(radians(${lon2} - ${lon1}) / 2), 2)`;
  return `(2 * ?::float8 * asin(CASE WHEN (${a}) IS NULL THEN NULL ELSE least(1, sqrt(${a})) END))`;
}
