import test from 'ava';
import { haversineKm } from '../../shared/geo';
import { mapStation, nearestStation, onWater, WaterLevelStation } from '../../shared/pegel/stations';
import { syntheticStations } from '../helpers/fakePegel';

/**
 * nearestStation compares the haversine's inner term and measures only the winner: it must pick
 * the station, and give the distance, that measuring every station would.
 */
const stations: WaterLevelStation[] = syntheticStations(700).map((s) => {
  const mapped = mapStation({
    ...s,
    timeseries: [{ shortname: 'W', currentMeasurement: { value: s.level, trend: s.trend } }],
  } as never);
  if (!mapped) throw new Error('synthetic station did not map');
  return mapped;
});

function bruteForce(list: WaterLevelStation[], lat: number, lon: number, radiusKm?: number) {
  let best: WaterLevelStation | undefined;
  let bestKm = Infinity;
  for (const s of list) {
    const d = haversineKm(lat, lon, s.latitude, s.longitude);
    if (radiusKm !== undefined && d > radiusKm) continue;
    if (d < bestKm) [best, bestKm] = [s, d];
  }
  return best && { id: best.station_id, km: Math.round(bestKm * 1000) / 1000 };
}

test('the same station and distance as measuring every station, with and without a radius', (t) => {
  let seed = 7;
  const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
  let withinRadius = 0;
  for (let i = 0; i < 2000; i++) {
    // Mostly over the stations' area, some anywhere on Earth.
    const lat = i % 5 ? 46 + random() * 10 : -90 + random() * 180;
    const lon = i % 5 ? 4 + random() * 13 : -180 + random() * 360;
    const radius = i % 3 === 0 ? random() * 60 : undefined;
    const list = i % 4 === 0 ? onWater(stations, `water${String(i % 60).padStart(2, '0')}`) : stations;
    const got = nearestStation(list, lat, lon, radius);
    const want = bruteForce(list, lat, lon, radius);
    t.deepEqual(got && { id: got.station_id, km: got.distance_km }, want, `${lat},${lon} r=${radius}`);
    if (radius !== undefined && want) withinRadius++;
  }
  t.true(withinRadius > 50, 'radius searches that found a station were tried');
  t.is(nearestStation([], 50, 7), undefined);
});

test('onWater: the same filtered list for the same list and water, in any case', (t) => {
  const a = onWater(stations, 'WATER07');
  t.is(a.length, stations.filter((s) => s.water_shortname === 'WATER07').length);
  t.true(a.length > 0);
  t.is(onWater(stations, 'water07'), a);
  t.is(onWater(stations), stations);
  t.deepEqual(onWater(stations, 'NOWHERE'), []);
});
