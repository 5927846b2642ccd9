import test from 'ava';
import Redis from 'ioredis';
import { SUBSCRIBER } from '../helpers/pushes';
import { randomUUID } from 'node:crypto';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { countRows, gpsBody, make, nowSeconds, once } from '../helpers/tracking';
import { eventually } from '../helpers/wait';

const stack = useStack(test, { workers: true, env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' } });
const users = once(async () => {
  const s = stack();
  const [developer, nobody, admin] = await Promise.all([
    createUser(s.db, { roles: ['role_developer'] }),
    createUser(s.db, { roles: [] }),
    createUser(s.db, { roles: ['role_admin'] }),
  ]);
  return { developer, nobody, admin };
});

interface Pushed {
  channel: string;
  data: { geofence_id: string; event: 'enter' | 'exit'; device_id: string | null; distance_km: number };
}

async function listen(s: ReturnType<typeof stack>) {
  const sub = new Redis(s.config.redisUrl, SUBSCRIBER);
  const received: Pushed[] = [];
  sub.on('pmessage', (_p, channel, raw) =>
    received.push({ channel: channel.slice(s.config.redisPrefix.length + 'ws:'.length), data: JSON.parse(raw).data }),
  );
  await sub.psubscribe(`${s.config.redisPrefix}ws:geofence*`);
  return { received, close: () => sub.disconnect() };
}

/** Waits until every point accepted so far is evaluated: the outbox relay enqueues its job, then the queue empties. */
async function drained(s: ReturnType<typeof stack>) {
  await s.api.services.outbox.drain();
  const q = s.api.services.queues.queue('geofence');
  await eventually(async () => {
    const c = await q.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
    return Object.values(c).every((n) => n === 0);
  }, 10_000);
}

const iso = (seconds: number) => new Date(seconds * 1000).toISOString();

test('min_dwell_seconds: border jitter does not flap; out-of-order and late points; far exits; history endpoints', async (t) => {
  const s = stack();
  const { developer, nobody } = await users();
  const l = await listen(s);
  try {
    const center = { latitude: 47.1, longitude: 8.1 };
    const g = await make(s, developer.token, '/v1/geofences', {
      name: 'Quay',
      ...center,
      radius_km: 1,
      min_dwell_seconds: 60,
    });
    t.is(g.min_dwell_seconds, 60);
    const device = await make(s, developer.token, '/v1/devices', { name: `dwell-${randomUUID().slice(0, 8)}` });
    const IN = { latitude: 47.105, longitude: 8.1 }; // ~0.56 km from the centre
    const OUT = { latitude: 47.115, longitude: 8.1 }; // ~1.7 km: just outside
    const FAR = { latitude: 50, longitude: 12 }; // hundreds of km: not a candidate of the grid cell
    const t0 = nowSeconds() - 1000;
    const seq: Array<[number, { latitude: number; longitude: number }]> = [
      [0, OUT],
      [10, IN], // pending enter
      [20, OUT], // jitter: cancelled
      [30, IN], // pending enter again…
      [60, IN], // held 30 s: not yet
      [95, IN], // held 65 s ≥ 60: enter
      [100, OUT], // pending exit
      [110, IN], // cancelled
      [120, FAR], // pending exit
      [200, FAR], // held 80 s: exit
    ];
    // Sent in a shuffled order in one batch: evaluated in time order.
    const points = seq
      .map(([dt, pos]) => gpsBody({ device_id: device.id, ...pos, timestamp: t0 + dt }))
      .sort(
        (a, b) => String(a.latitude).localeCompare(String(b.latitude)) || Number(b.timestamp) - Number(a.timestamp),
      );
    const r = await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points } });
    t.is(r.status, 201);
    await drained(s);
    const mine = () => l.received.filter((m) => m.channel === 'geofence' && m.data.geofence_id === g.id);
    await eventually(() => mine().length >= 2);
    t.deepEqual(
      mine().map((m) => m.data.event),
      ['enter', 'exit'],
    );
    // A late point older than the last one applied (inside) changes nothing: had it started a pending
    // enter, the point at +220 would confirm it (held 70 s); as it is, +220 starts one and +300 confirms it.
    const late = await make(
      s,
      developer.token,
      '/v1/gps',
      gpsBody({ device_id: device.id, ...IN, timestamp: t0 + 150 }),
    );
    await drained(s);
    t.is(mine().length, 2);
    t.is(await countRows(s.db('geofence_events').where('gps_point_id', late.id)), 0);
    await make(s, developer.token, '/v1/gps', gpsBody({ device_id: device.id, ...IN, timestamp: t0 + 220 }));
    const confirming = await make(
      s,
      developer.token,
      '/v1/gps',
      gpsBody({ device_id: device.id, ...IN, timestamp: t0 + 300 }),
    );
    await eventually(() => mine().length === 3);
    t.deepEqual(
      mine().map((m) => m.data.event),
      ['enter', 'exit', 'enter'],
    );
    t.deepEqual(
      (await s.db('geofence_events').where('geofence_id', g.id).orderBy('occurred_at'))
        .map((e) => e.gps_point_id)
        .at(-1),
      confirming.id,
    );

    // The history, newest first, dated by the point that confirmed each change.
    const list = await s.request('GET', `/v1/geofences/${g.id}/events`, { token: developer.token });
    t.is(list.status, 200);
    t.deepEqual(
      list.body.data.map((e: any) => [e.event, e.occurred_at, e.device_id]),
      [
        ['enter', iso(t0 + 300), device.id],
        ['exit', iso(t0 + 200), device.id],
        ['enter', iso(t0 + 95), device.id],
      ],
    );
    t.is(list.body.pagination.total, 3);
    t.true(list.body.data[1].distance_km > 100);
    const page = await s.request('GET', `/v1/devices/${device.id}/geofence-events?limit=1&page=3`, {
      token: developer.token,
    });
    t.is(page.status, 200);
    t.deepEqual(
      page.body.data.map((e: any) => [e.event, e.geofence_id]),
      [['enter', g.id]],
    );
    t.like(page.body.pagination, { page: 3, limit: 1, total: 3, total_pages: 3 });

    // Access: no credential 401, without geofences:read 403, unknown ids 404, bad ids 400.
    t.is((await s.request('GET', `/v1/geofences/${g.id}/events`)).status, 401);
    t.is((await s.request('GET', `/v1/geofences/${g.id}/events`, { token: nobody.token })).status, 403);
    t.is((await s.request('GET', `/v1/devices/${device.id}/geofence-events`, { token: nobody.token })).status, 403);
    t.is((await s.request('GET', `/v1/geofences/${randomUUID()}/events`, { token: developer.token })).status, 404);
    t.is(
      (await s.request('GET', `/v1/devices/${randomUUID()}/geofence-events`, { token: developer.token })).status,
      404,
    );
    const bad = await s.request('GET', `/v1/geofences/${g.id}/events?limit=0`, { token: developer.token });
    t.is(bad.status, 400);
    t.regex(bad.body.message, /limit/);
    t.is(
      (await s.request('PATCH', `/v1/geofences/${g.id}`, { token: developer.token, body: { min_dwell_seconds: -1 } }))
        .status,
      400,
    );
  } finally {
    l.close();
  }
});

test('without min_dwell_seconds a change counts at once; a deleted fence stops events and takes its history', async (t) => {
  const s = stack();
  const { developer, admin } = await users();
  const l = await listen(s);
  try {
    const g = await make(s, developer.token, '/v1/geofences', {
      name: 'Gone',
      latitude: -33.9,
      longitude: 18.4,
      radius_km: 2,
    });
    t.is(g.min_dwell_seconds, 0);
    const device = `gone-${randomUUID().slice(0, 8)}`;
    const t0 = nowSeconds();
    await make(
      s,
      developer.token,
      '/v1/gps',
      gpsBody({ device_id: device, latitude: -33.9, longitude: 18.4, timestamp: t0 }),
    );
    await eventually(() => l.received.some((m) => m.data.geofence_id === g.id && m.data.event === 'enter'));
    const before = await s.request('GET', `/v1/geofences/${g.id}/events`, { token: developer.token });
    t.is(before.body.pagination.total, 1);
    t.is((await s.request('DELETE', `/v1/geofences/${g.id}`, { token: admin.token })).status, 204);
    await make(
      s,
      developer.token,
      '/v1/gps',
      gpsBody({ device_id: device, latitude: -34.5, longitude: 18.4, timestamp: t0 + 5 }),
    );
    await drained(s);
    t.deepEqual(
      l.received.filter((m) => m.data.geofence_id === g.id && m.channel === 'geofence').map((m) => m.data.event),
      ['enter'],
    );
    t.is((await s.request('GET', `/v1/geofences/${g.id}/events`, { token: developer.token })).status, 404);
    t.is(Number((await s.db('geofence_events').where('geofence_id', g.id).count('* as n'))[0].n), 0);
  } finally {
    l.close();
  }
});

test.serial('a transition whose recording failed is recorded and pushed by the retry, once', async (t) => {
  const s = stack();
  const { developer } = await users();
  const l = await listen(s);
  // The next insert into geofence_events fails once (a sequence is not rolled back with it).
  const seq = `gf_fail_${randomUUID().slice(0, 8)}`;
  await s.db.raw(`CREATE SEQUENCE ${seq}`);
  await s.db.raw(`CREATE FUNCTION ${seq}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF nextval('${seq}') = 1 THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$`);
  await s.db.raw(`CREATE TRIGGER ${seq} BEFORE INSERT ON geofence_events FOR EACH ROW EXECUTE FUNCTION ${seq}()`);
  try {
    const g = await make(s, developer.token, '/v1/geofences', {
      name: 'Flaky',
      latitude: 12.5,
      longitude: -70.0,
      radius_km: 2,
    });
    const device = `flaky-${randomUUID().slice(0, 8)}`;
    await make(
      s,
      developer.token,
      '/v1/gps',
      gpsBody({ device_id: device, latitude: 12.5, longitude: -70.0, timestamp: nowSeconds() }),
    );
    // The job fails once (the state already moved on) and its retry, a second later, records it.
    await eventually(() => l.received.some((m) => m.data.geofence_id === g.id), 15_000);
    await drained(s);
    t.is(Number((await s.db.raw(`SELECT last_value FROM ${seq}`)).rows[0].last_value) >= 2, true, 'it did fail once');
    const rows = await s.db('geofence_events').where('geofence_id', g.id);
    t.deepEqual(
      rows.map((r) => r.event),
      ['enter'],
    );
    t.deepEqual(
      l.received.filter((m) => m.data.geofence_id === g.id && m.channel === 'geofence').map((m) => m.data.event),
      ['enter'],
    );
  } finally {
    l.close();
    await s.db.raw(`DROP TRIGGER IF EXISTS ${seq} ON geofence_events`);
    await s.db.raw(`DROP FUNCTION IF EXISTS ${seq}()`);
    await s.db.raw(`DROP SEQUENCE IF EXISTS ${seq}`);
  }
});
