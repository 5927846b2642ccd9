import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { haversineKm } from '../../shared/geo';

/**
 * A local PEGELONLINE REST API v2 for tests: `GET /stations.json` answers StationOverviewResult
 * (stations with water, km, agency, coordinates and, when asked with includeTimeseries and
 * includeCurrentMeasurement, their timeseries with currentMeasurement), honouring `waters` and
 * `latitude`/`longitude`/`radius` as the real service does. It counts requests and can fail or
 * answer slowly on demand.
 */
export interface FakePegelStation {
  uuid: string;
  number: string;
  shortname: string;
  longname: string;
  km: number;
  agency: string;
  longitude: number;
  latitude: number;
  water: { shortname: string; longname: string };
  /** Current W value in cm (no W timeseries when undefined); trend as upstream gives it (omitted when undefined). */
  level?: number;
  trend?: number;
}

export const FAKE_STATIONS: FakePegelStation[] = [
  {
    uuid: '47174d8f-1b8e-4599-8a59-b580dd55bc87',
    number: '48900237',
    shortname: 'EITZE',
    longname: 'EITZE',
    km: 9.56,
    agency: 'VERDEN',
    longitude: 9.276769435375872,
    latitude: 52.90406544743417,
    water: { shortname: 'ALLER', longname: 'ALLER' },
    level: 254,
    trend: -1,
  },
  {
    uuid: 'a6ee8177-107b-47dd-bcfd-30960ccc6e9c',
    number: '2710080',
    shortname: 'KÖLN',
    longname: 'KÖLN',
    km: 688,
    agency: 'RHEIN',
    longitude: 6.963300043278783,
    latitude: 50.93692537549045,
    water: { shortname: 'RHEIN', longname: 'RHEIN' },
    level: 312,
    trend: 1,
  },
  {
    uuid: '593647aa-9fea-43ec-a7d6-6476a76ae868',
    number: '2730010',
    shortname: 'BONN',
    longname: 'BONN',
    km: 654.8,
    agency: 'RHEIN',
    longitude: 7.106807497186081,
    latitude: 50.73693898506389,
    water: { shortname: 'RHEIN', longname: 'RHEIN' },
    level: 287,
  },
  {
    uuid: '09e15cf6-f155-4b76-b92f-6c260839121c',
    number: '586040',
    shortname: 'BERLIN-MÜHLENDAMM UP',
    longname: 'BERLIN-MÜHLENDAMM UP',
    km: 17.73,
    agency: 'SPREE-HAVEL',
    longitude: 13.40877,
    latitude: 52.51365,
    water: { shortname: 'SPREE', longname: 'SPREE-ODER-WASSERSTRASSE' },
    level: 182,
    trend: 0,
  },
  {
    // A station measuring only water temperature: not a water-level station for the service.
    uuid: 'b3a4bd4c-4a1b-4bb0-8f35-bd9b7a3b8e2a',
    number: '2710090',
    shortname: 'KÖLN-NORD',
    longname: 'KÖLN-NORD TEMPERATUR',
    km: 695,
    agency: 'RHEIN',
    longitude: 6.97,
    latitude: 50.96,
    water: { shortname: 'RHEIN', longname: 'RHEIN' },
  },
];

/**
 * `n` made-up water-level stations spread over Germany on 60 waters, as many as PEGELONLINE lists
 * (about 700): for measuring the /v1/pegel routes at their real size. Deterministic (same `n`, same
 * stations), with uuids of their own.
 */
export function syntheticStations(n: number): FakePegelStation[] {
  const out: FakePegelStation[] = [];
  for (let i = 0; i < n; i++) {
    const hex = (i + 1).toString(16).padStart(12, '0');
    const water = `WATER${String(i % 60).padStart(2, '0')}`;
    out.push({
      uuid: `5e000000-0000-4000-8000-${hex}`,
      number: String(90000000 + i),
      shortname: `STATION ${i}`,
      longname: `STATION ${i} ${water}`,
      km: (i * 7.3) % 900,
      agency: `AGENCY ${i % 17}`,
      longitude: 6 + ((i * 0.6180339887) % 1) * 9,
      latitude: 47.5 + ((i * 0.4142135623) % 1) * 7,
      water: { shortname: water, longname: `${water} LONG NAME` },
      level: 100 + ((i * 37) % 500),
      trend: (i % 3) - 1,
    });
  }
  return out;
}

function stationJson(s: FakePegelStation, timeseries: boolean, current: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {
    uuid: s.uuid,
    number: s.number,
    shortname: s.shortname,
    longname: s.longname,
    km: s.km,
    agency: s.agency,
    longitude: s.longitude,
    latitude: s.latitude,
    water: s.water,
  };
  if (timeseries) {
    const temperature = { shortname: 'WT', longname: 'WASSERTEMPERATUR', unit: '°C', equidistance: 15 } as Record<
      string,
      unknown
    >;
    if (current) temperature.currentMeasurement = { timestamp: '2026-11-24T06:15:00+01:00', value: 7.4 };
    if (s.level === undefined) {
      out.timeseries = [temperature];
      return out;
    }
    const w: Record<string, unknown> = {
      shortname: 'W',
      longname: 'WASSERSTAND ROHDATEN',
      unit: 'cm',
      equidistance: 15,
      gaugeZero: { unit: 'm. ü. NHN', value: 8.0, validFrom: '2019-11-01' },
    };
    if (current) {
      const m: Record<string, unknown> = {
        timestamp: '2026-11-24T06:15:00+01:00',
        value: s.level,
        stateMnwMhw: 'normal',
        stateNswHsw: 'unknown',
      };
      if (s.trend !== undefined) m.trend = s.trend;
      w.currentMeasurement = m;
    }
    // A second timeseries, as most stations have: only W gives level_cm.
    const q = { shortname: 'WT', longname: 'WASSERTEMPERATUR', unit: '°C', equidistance: 15 } as Record<
      string,
      unknown
    >;
    if (current) q.currentMeasurement = { timestamp: '2026-11-24T06:15:00+01:00', value: 7.4 };
    out.timeseries = [q, w];
  }
  return out;
}

export interface FakePegel {
  url: string;
  stations: FakePegelStation[];
  /** Requests to stations.json so far, with their query strings. */
  requests: URLSearchParams[];
  /** Answer with this status instead of the stations (0: answer normally). */
  failWith: number;
  /** Wait this long before answering. */
  delayMs: number;
  /** Answer 200 with this JSON body instead of the stations (undefined: answer normally). */
  malformed?: unknown;
  close(): Promise<void>;
}

/** Starts the fake on an ephemeral port; the base URL stands for …/webservices/rest-api/v2. */
export async function startFakePegel(): Promise<FakePegel> {
  const fake: FakePegel = {
    url: '',
    stations: FAKE_STATIONS.map((s) => ({ ...s })),
    requests: [],
    failWith: 0,
    delayMs: 0,
    close: async () => undefined,
  };
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://fake');
    if (u.pathname !== '/stations.json') {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"status":404}');
      return;
    }
    fake.requests.push(u.searchParams);
    const answer = () => {
      if (res.destroyed) return;
      if (fake.failWith) {
        res
          .writeHead(fake.failWith, { 'content-type': 'text/html' })
          .end('<html><body>Internal Server Error</body></html>');
        return;
      }
      if (fake.malformed !== undefined) {
        res.writeHead(200, { 'content-type': 'application/json;charset=UTF-8' }).end(JSON.stringify(fake.malformed));
        return;
      }
      const p = u.searchParams;
      const waters = p.get('waters')?.split(',').filter(Boolean);
      const lat = p.get('latitude');
      const lon = p.get('longitude');
      const radius = p.get('radius');
      const list = fake.stations.filter(
        (s) =>
          (!waters || waters.includes(s.water.shortname)) &&
          (lat === null ||
            lon === null ||
            radius === null ||
            haversineKm(Number(lat), Number(lon), s.latitude, s.longitude) <= Number(radius)),
      );
      const body = list.map((s) =>
        stationJson(s, p.get('includeTimeseries') === 'true', p.get('includeCurrentMeasurement') === 'true'),
      );
      res.writeHead(200, { 'content-type': 'application/json;charset=UTF-8' }).end(JSON.stringify(body));
    };
    if (fake.delayMs) setTimeout(answer, fake.delayMs);
    else answer();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return fake;
}
