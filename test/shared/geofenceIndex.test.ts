import test from 'ava';
import { containingNaive, GeofenceIndex, IndexedFence } from '../../shared/domain/geofenceIndex';
import { EARTH_RADIUS_KM, haversineKm } from '../../shared/geo';

const fence = (id: string, latitude: number, longitude: number, radius_km: number): IndexedFence => ({
  id,
  name: id,
  latitude,
  longitude,
  radius_km,
  min_dwell_seconds: 0,
  metadata: null,
});

const rad = (d: number) => (d * Math.PI) / 180;
const deg = (r: number) => (r * 180) / Math.PI;

/** The point `km` from (lat, lng) along `bearing` degrees, on the sphere haversineKm measures on. */
function destination(lat: number, lng: number, km: number, bearing: number): [number, number] {
  const d = km / EARTH_RADIUS_KM;
  const φ1 = rad(lat);
  const φ2 = Math.asin(Math.sin(φ1) * Math.cos(d) + Math.cos(φ1) * Math.sin(d) * Math.cos(rad(bearing)));
  const λ2 =
    rad(lng) +
    Math.atan2(Math.sin(rad(bearing)) * Math.sin(d) * Math.cos(φ1), Math.cos(d) - Math.sin(φ1) * Math.sin(φ2));
  return [deg(φ2), deg(λ2)];
}

test('a point just inside a fence, in any direction, is found by the index', (t) => {
  // The audit's case: 99.987 km due north of a 100 km fence's centre found no candidate.
  const audited = fence('audited', 0.101, 0.1, 100);
  t.true(haversineKm(1.0002, 0.1, 0.101, 0.1) <= 100);
  t.deepEqual(
    new GeofenceIndex([audited]).containing(1.0002, 0.1).map((f) => f.id),
    ['audited'],
  );

  let checked = 0;
  for (const lat of [-84, -60, -33.3, -0.2, 0, 0.101, 12.5, 45, 52.52, 70, 84])
    for (const radius of [0.05, 1, 13.7, 100, 480]) {
      const f = fence(`${lat}/${radius}`, lat, 10.3, radius);
      const index = new GeofenceIndex([f]);
      for (let bearing = 0; bearing < 360; bearing += 7.5) {
        const [pLat, pLng] = destination(lat, 10.3, radius * (1 - 1e-7), bearing);
        if (Math.abs(pLat) >= 90) continue;
        t.deepEqual(
          index.containing(pLat, pLng).map((x) => x.id),
          containingNaive([f], pLat, pLng).map((x) => x.id),
          `fence at ${lat}° of ${radius} km, bearing ${bearing}°`,
        );
        t.is(index.containing(pLat, pLng).length, 1, `fence at ${lat}° of ${radius} km, bearing ${bearing}°`);
        checked++;
      }
    }
  t.true(checked > 2000);
});
