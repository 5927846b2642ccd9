/**
 * Geofence benchmark (npm run bench:geofence), loopback, one run:
 *
 *   1. index vs naive   BENCH_GEOFENCE_FENCES (10,000) circular fences (0.2-3 km) over central
 *                       Europe and BENCH_GEOFENCE_DEVICES (1,000) devices moving among them: points
 *                       per second for "which fences contain this point" with the grid index of
 *                       shared/domain/geofenceIndex.ts and with a scan of every fence, same points,
 *                       same answers (checked);
 *   2. worker path      evaluateGeofences (fence index, Redis state with dwell, geofence_events
 *                       insert, publish) on batches of 100 stored points: points/s of one worker;
 *   3. end to end       api, workers and realtime as three processes, a WebSocket subscriber of
 *                       `geofence`; POST /v1/gps at BENCH_GEOFENCE_RATE (500) points/s for
 *                       BENCH_SECONDS (10), every point crossing a fence border, and the time from
 *                       sending the POST to receiving its geofenceEvent frame (p50/p99/max).
 * Goal: p99 < 100 ms at 500 points/s.
 * Environment: DATABASE_URL, REDIS_URL, BENCH_SECONDS, BENCH_WARMUP_SECONDS (3, same rate, not measured), BENCH_GEOFENCE_FENCES, BENCH_GEOFENCE_DEVICES,
 * BENCH_GEOFENCE_RATE.
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { evaluateGeofences } from '../shared/commands/evaluateGeofences';
import { createSession } from '../shared/commands/sessions';
import { loadConfig } from '../shared/config';
import { createContext, ServiceContext } from '../shared/context';
import { containingNaive, GeofenceIndex, IndexedFence } from '../shared/domain/geofenceIndex';
import { freePort, ServiceProcess, spawnService } from '../test/helpers/processes';
import { benchCleanup, freshBenchDatabase } from './benchDatabase';

const FENCES = Number(process.env.BENCH_GEOFENCE_FENCES || 10_000);
const DEVICES = Number(process.env.BENCH_GEOFENCE_DEVICES || 1000);
const RATE = Number(process.env.BENCH_GEOFENCE_RATE || 500);
const SECONDS = Number(process.env.BENCH_SECONDS || 10);
/** Seconds sent at the same rate before measuring (JIT, pools, prepared statements, the fence index). */
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);

let seed = 42;
const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;

function fences(): IndexedFence[] {
  return Array.from({ length: FENCES }, (_, i) => ({
    id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    name: `fence ${i}`,
    latitude: 45 + rand() * 10,
    longitude: 5 + rand() * 15,
    radius_km: 0.2 + rand() * 2.8,
    min_dwell_seconds: 0,
    metadata: null,
  }));
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

function indexVsNaive(all: IndexedFence[]) {
  // Each device walks near a fence of its own, so many points are inside something.
  const points: Array<[number, number]> = [];
  for (let step = 0; step < 20; step++)
    for (let d = 0; d < DEVICES; d++) {
      const f = all[(d * 7) % all.length];
      points.push([f.latitude + (rand() - 0.5) * 0.05, f.longitude + (rand() - 0.5) * 0.05]);
    }
  let t = performance.now();
  const index = new GeofenceIndex(all);
  const buildMs = performance.now() - t;
  t = performance.now();
  let hitsIndexed = 0;
  for (const [lat, lng] of points) hitsIndexed += index.containing(lat, lng).length;
  const indexedMs = performance.now() - t;
  const naivePoints = points.slice(0, Math.min(points.length, 2000));
  t = performance.now();
  let hitsNaive = 0;
  for (const [lat, lng] of naivePoints) hitsNaive += containingNaive(all, lat, lng).length;
  const naiveMs = performance.now() - t;
  let check = 0;
  for (const [lat, lng] of naivePoints) check += index.containing(lat, lng).length;
  if (check !== hitsNaive) throw new Error(`index and naive scan disagree: ${check} vs ${hitsNaive}`);
  return {
    buildMs,
    indexed: points.length / (indexedMs / 1000),
    naive: naivePoints.length / (naiveMs / 1000),
    hitsIndexed,
    candidatesPerPoint: points.reduce((n, [lat, lng]) => n + index.candidates(lat, lng).length, 0) / points.length,
  };
}

function post(port: number, token: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: '/v1/gps',
        method: 'POST',
        agent,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

async function main(): Promise<void> {
  const all = fences();
  const a = indexVsNaive(all);
  process.stdout.write(
    `index built in ${a.buildMs.toFixed(0)} ms; ${a.candidatesPerPoint.toFixed(1)} candidates per point\n`,
  );

  const settings = {
    REDIS_PREFIX: `benchgeo:${randomBytes(4).toString('hex')}:`,
    LOG_LEVEL: 'warn',
    RATE_LIMIT_USER: '10000000',
    RATE_LIMIT_GPS_POST: '10000000',
    PORT: '0',
    HOST: '127.0.0.1',
  };
  const { url, db } = await freshBenchDatabase('bench_geofence', settings);
  const services: ServiceProcess[] = [];
  let ctx: ServiceContext | undefined;
  let ws: WebSocket | undefined;
  const cleanup = benchCleanup(
    { url, redisUrl: process.env.REDIS_URL, redisPrefix: settings.REDIS_PREFIX },
    async () => {
      ws?.terminate();
      // api, workers and realtime stop before their database and Redis keys go.
      for (const p of services) p.child.kill('SIGTERM');
      await Promise.all(services.map((p) => p.exited));
      await ctx?.close();
      await db.destroy();
    },
  );
  try {
    const config0 = loadConfig({ ...process.env, ...settings, DATABASE_URL: url });
    for (let i = 0; i < all.length; i += 1000)
      await db('geofences').insert(
        all.slice(i, i + 1000).map((f) => ({ ...f, id: undefined, metadata: null, min_dwell_seconds: 0 })),
      );
    const stored: IndexedFence[] = await db('geofences').select(
      'id',
      'name',
      'latitude',
      'longitude',
      'radius_km',
      'min_dwell_seconds',
      'metadata',
    );
    const [user] = await db('users').insert({ username: 'bench_geofence' }).returning('id');
    await db('user_roles').insert({ user_id: user.id, role_id: 'role_admin' });
    const { token } = await createSession(db, user.id, new Date(Date.now() + 86400_000), {});

    // 2. the worker path on stored points
    const worker = createContext(config0, 'bench');
    ctx = worker;
    const now = Math.floor(Date.now() / 1000) - 3600;
    const rows = [];
    for (let i = 0; i < 5000; i++) {
      const f = stored[(i * 13) % stored.length];
      const inside = Math.floor(i / DEVICES) % 2 === 0;
      rows.push({
        device_id: `bench-${i % DEVICES}`,
        latitude: inside ? f.latitude : f.latitude + 0.2,
        longitude: f.longitude,
        timestamp: new Date((now + i) * 1000),
        speed_kmh: 0,
        speed_mps: 0,
        speed_mph: 0,
        speed_knots: 0,
      });
    }
    const ids: string[] = [];
    for (let i = 0; i < rows.length; i += 1000)
      ids.push(
        ...(
          await db('gps_points')
            .insert(rows.slice(i, i + 1000))
            .returning('id')
        ).map((r) => r.id),
      );
    await evaluateGeofences(worker, ids.slice(0, 100)); // builds the index
    const t = performance.now();
    let events = 0;
    for (let i = 100; i < ids.length; i += 100)
      events += (await evaluateGeofences(worker, ids.slice(i, i + 100))).length;
    const workerRate = (ids.length - 100) / ((performance.now() - t) / 1000);
    ctx = undefined;
    await worker.close();

    // 3. end to end, with api, workers and realtime as three processes (as PM2 runs them), so the
    // load generator and the subscriber here do not share an event loop with the service.
    const realtimePort = await freePort();
    const apiPort = await freePort();
    const env = {
      ...settings,
      DATABASE_URL: url,
      PORT: String(apiPort),
      REALTIME_PORT: String(realtimePort),
      API_INSTANCES: '1',
    };
    const realtime = await spawnService('realtime', env, 'realtime listening');
    services.push(realtime);
    const api = await spawnService('api', env, 'api listening');
    services.push(api);
    const workers = await spawnService('workers', env, 'workers ready');
    services.push(workers);
    const socket = new WebSocket(`ws://127.0.0.1:${realtimePort}/v1/ws`, {
      headers: { authorization: `Bearer ${token}` },
    });
    ws = socket;
    await new Promise((r, j) => (socket.once('open', r), socket.once('error', j)));
    const sent = new Map<string, Array<{ at: number; measured: boolean }>>();
    const latencies: number[] = [];
    let warmFrames = 0;
    socket.on('message', (raw: Buffer) => {
      const m = JSON.parse(raw.toString());
      if (m.type !== 'geofenceEvent') return;
      const q = sent.get(m.data.device_id);
      const one = q?.shift();
      if (one?.measured) latencies.push(performance.now() - one.at);
      else if (one) warmFrames++;
    });
    socket.send(JSON.stringify({ type: 'subscribe', channel: 'geofence' }));
    await new Promise((r) => setTimeout(r, 300));
    // Each device alternates between its fence's centre and 20 km away: every point is an enter or exit.
    const warm = RATE * WARMUP;
    const total = warm + RATE * SECONDS;
    const start = performance.now();
    const pending: Promise<number>[] = [];
    let statusErrors = 0;
    const postLatencies: number[] = [];
    for (let i = 0; i < total; i++) {
      const due = start + (i * 1000) / RATE;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      const d = i % DEVICES;
      const f = stored[(d * 17) % stored.length];
      const inside = Math.floor(i / DEVICES) % 2 === 0;
      const device = `e2e-${d}`;
      const body = JSON.stringify({
        device_id: device,
        latitude: inside ? f.latitude : f.latitude + 0.2,
        longitude: f.longitude,
        timestamp: Math.floor(Date.now() / 1000) - total + i,
        speed_kmh: 0,
        speed_mps: 0,
        speed_mph: 0,
        speed_knots: 0,
      });
      // Outside on the first pass is no change (no event): only count points that cross.
      const crosses = inside || Math.floor(i / DEVICES) > 0;
      if (crosses) {
        const q = sent.get(device) ?? [];
        q.push({ at: performance.now(), measured: i >= warm });
        sent.set(device, q);
      }
      const postAt = performance.now();
      pending.push(
        post(apiPort, token, body).then((s) => {
          if (i >= warm) postLatencies.push(performance.now() - postAt);
          return s === 201 ? s : (statusErrors++, s);
        }),
      );
    }
    await Promise.all(pending);
    const sendSeconds = (performance.now() - start) / 1000;
    await new Promise((r) => setTimeout(r, 3000));
    const expected = [...sent.values()].reduce((n, q) => n + q.filter((x) => x.measured).length, 0) + latencies.length;
    latencies.sort((x, y) => x - y);
    postLatencies.sort((x, y) => x - y);
    socket.close();

    process.stdout.write('\n| run | points/s | note |\n|---|---:|---|\n');
    process.stdout.write(
      `| index (grid) containment, ${FENCES} fences, ${DEVICES} devices | ${Math.round(a.indexed).toLocaleString('en')} | ${a.hitsIndexed} hits |\n`,
    );
    process.stdout.write(
      `| naive scan of every fence, same points | ${Math.round(a.naive).toLocaleString('en')} | same answers (checked) |\n`,
    );
    process.stdout.write(
      `| worker: evaluateGeofences, batches of 100 | ${Math.round(workerRate).toLocaleString('en')} | ${events} events recorded and published |\n`,
    );
    process.stdout.write(
      `\nend to end at ${RATE} points/s for ${SECONDS} s after ${WARMUP} s of warm-up (sent in ${sendSeconds.toFixed(1)} s, ${statusErrors} non-201): ` +
        `${latencies.length}/${expected} geofenceEvent frames (and ${warmFrames} during warm-up); POST → frame p50 ${pct(latencies, 50)?.toFixed(1)} ms, ` +
        `p99 ${pct(latencies, 99)?.toFixed(1)} ms, max ${latencies[latencies.length - 1]?.toFixed(1)} ms\n`,
    );
    process.stdout.write(
      `POST /v1/gps → 201: p50 ${pct(postLatencies, 50)?.toFixed(1)} ms, p99 ${pct(postLatencies, 99)?.toFixed(1)} ms\n`,
    );
    process.stdout.write(`goal p99 < 100 ms: ${pct(latencies, 99) < 100 ? 'met' : 'NOT met'}\n`);
  } finally {
    await cleanup();
  }
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
