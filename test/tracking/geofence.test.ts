import test from 'ava';
import Redis from 'ioredis';
import { SUBSCRIBER } from '../helpers/pushes';
import { haversineKm } from '../../shared/geo';
import { useStack } from '../helpers/stack';
import { adminAndDeveloper, countRows, gpsBody, make, nowSeconds } from '../helpers/tracking';
import { eventually } from '../helpers/wait';

const stack = useStack(test, { workers: true, env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' } });
const users = adminAndDeveloper(stack);

interface GeofenceMsg {
  channel: string;
  message: {
    type: string;
    data: {
      geofence_id: string;
      geofence_name: string;
      event: 'enter' | 'exit';
      device_id: string | null;
      distance_km: number;
      metadata: unknown;
    };
  };
}

/** Subscribes to the geofence channels (pattern) with a separate Redis client. */
async function listen(s: ReturnType<typeof stack>) {
  const sub = new Redis(s.config.redisUrl, SUBSCRIBER);
  const received: GeofenceMsg[] = [];
  sub.on('pmessage', (_p, channel, raw) =>
    received.push({ channel: channel.slice(s.config.redisPrefix.length + 'ws:'.length), message: JSON.parse(raw) }),
  );
  await sub.psubscribe(`${s.config.redisPrefix}ws:geofence*`);
  return { received, close: () => sub.disconnect() };
}

/**
 * Waits until the worker has evaluated every point accepted so far: first the outbox relay enqueues
 * their geofence jobs (it runs a pass some milliseconds after the commit), then the queue empties.
 */
async function drained(s: ReturnType<typeof stack>) {
  await s.api.services.outbox.drain();
  const q = s.api.services.queues.queue('geofence');
  await eventually(async () => {
    const c = await q.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
    return Object.values(c).every((n) => n === 0);
  }, 10_000);
}

// Serial (runs before the concurrent tests): it switches evaluation off for the whole stack.
test.serial('the geofence.evaluation_enabled system config switches evaluation off', async (t) => {
  const s = stack();
  const { developer } = await users();
  const l = await listen(s);
  try {
    const g = await make(s, developer.token, '/v1/geofences', {
      name: 'switch',
      latitude: 10,
      longitude: 10,
      radius_km: 1,
    });
    await s
      .db('system_config')
      .where('key', 'geofence.evaluation_enabled')
      .update({ value: JSON.stringify(false) });
    const off = await make(
      s,
      developer.token,
      '/v1/gps',
      gpsBody({ device_id: 'switch', latitude: 10, longitude: 10 }),
    );
    await drained(s);
    t.is(l.received.filter((m) => m.message.data.geofence_id === g.id).length, 0);
    t.is(await countRows(s.db('geofence_events').where('gps_point_id', off.id)), 0);
    await s
      .db('system_config')
      .where('key', 'geofence.evaluation_enabled')
      .update({ value: JSON.stringify(true) });
    // The same place again: an enter only if the first point was not evaluated (the device was outside).
    const on = await make(
      s,
      developer.token,
      '/v1/gps',
      gpsBody({ device_id: 'switch', latitude: 10, longitude: 10, timestamp: nowSeconds() + 1 }),
    );
    await eventually(async () => l.received.some((m) => m.message.data.geofence_id === g.id));
    t.deepEqual(
      (await s.db('geofence_events').where('geofence_id', g.id)).map((e) => [e.event, e.gps_point_id]),
      [['enter', on.id]],
    );
  } finally {
    l.close();
  }
});

test('enter and exit events per device on geofence and geofence:<id>, with distance and metadata', async (t) => {
  const s = stack();
  const { developer } = await users();
  const l = await listen(s);
  try {
    const center = { latitude: 53.5, longitude: 9.9 };
    const g = await make(s, developer.token, '/v1/geofences', {
      name: 'Harbour',
      ...center,
      radius_km: 1,
      metadata: { zone: 'A' },
    });
    const device = `fence-${Date.now()}`;
    const t0 = nowSeconds();
    const post = (i: number, lat: number, lon: number) =>
      make(
        s,
        developer.token,
        '/v1/gps',
        gpsBody({ device_id: device, latitude: lat, longitude: lon, timestamp: t0 + i }),
      );
    const mine = () =>
      l.received.filter((m) => m.message.data.geofence_id === g.id && m.message.data.device_id === device);

    await post(0, 53.6, 9.9); // ~11 km away: outside, no event
    await drained(s);
    t.is(mine().length, 0);
    await post(1, 53.503, 9.901); // inside
    const enter = await eventually(async () => mine().find((m) => m.channel === 'geofence'));
    t.deepEqual(Object.keys(enter.message).sort(), ['data', 'type']);
    t.is(enter.message.type, 'geofenceEvent');
    t.like(enter.message.data, {
      geofence_id: g.id,
      geofence_name: 'Harbour',
      event: 'enter',
      device_id: device,
      metadata: { zone: 'A' },
    });
    t.true(
      Math.abs(enter.message.data.distance_km - haversineKm(53.503, 9.901, center.latitude, center.longitude)) < 0.001,
    );
    t.true(enter.message.data.distance_km < 1);
    await eventually(async () => mine().some((m) => m.channel === `geofence:${g.id}`));
    await post(2, 53.5, 9.9); // still inside: no event
    await drained(s);
    t.is(mine().filter((m) => m.channel === 'geofence').length, 1);
    await post(3, 53.52, 9.9); // ~2.2 km: exit
    const exit = await eventually(async () =>
      mine().find((m) => m.channel === 'geofence' && m.message.data.event === 'exit'),
    );
    t.true(exit.message.data.distance_km > 1);
    t.deepEqual(
      mine()
        .filter((m) => m.channel === `geofence:${g.id}`)
        .map((m) => m.message.data.event),
      ['enter', 'exit'],
    );
    // A late, older point inside does not flip the state back: a later point inside is an enter again.
    const late = await post(-10, 53.5, 9.9);
    await drained(s);
    t.is(await countRows(s.db('geofence_events').where('gps_point_id', late.id)), 0);
    const again = await post(4, 53.5, 9.9);
    await eventually(async () => mine().filter((m) => m.channel === 'geofence').length === 3);
    t.deepEqual(
      mine()
        .filter((m) => m.channel === 'geofence')
        .map((m) => m.message.data.event),
      ['enter', 'exit', 'enter'],
    );
    t.is(
      (await s.db('geofence_events').where('geofence_id', g.id).orderBy('occurred_at', 'desc').first()).gps_point_id,
      again.id,
    );
  } finally {
    l.close();
  }
});

test('a batch is evaluated in timestamp order; other devices have their own state; inactive geofences are ignored', async (t) => {
  const s = stack();
  const { developer } = await users();
  const l = await listen(s);
  try {
    const g = await make(s, developer.token, '/v1/geofences', {
      name: 'Lock',
      latitude: -20,
      longitude: 40,
      radius_km: 0.5,
    });
    const off = await make(s, developer.token, '/v1/geofences', {
      name: 'Off',
      latitude: -20,
      longitude: 40,
      radius_km: 5,
    });
    await s.request('PATCH', `/v1/geofences/${off.id}`, { token: developer.token, body: { is_active: false } });
    const t0 = nowSeconds();
    // Sent out of order; in time order: outside, inside, outside → enter, exit.
    const points = [
      gpsBody({ device_id: 'barge-1', latitude: -20, longitude: 40, timestamp: t0 + 2 }),
      gpsBody({ device_id: 'barge-1', latitude: -20.1, longitude: 40, timestamp: t0 + 1 }),
      gpsBody({ device_id: 'barge-1', latitude: -20.1, longitude: 40, timestamp: t0 + 3 }),
      gpsBody({ device_id: 'barge-2', latitude: -20.001, longitude: 40, timestamp: t0 + 1 }),
      gpsBody({ latitude: -20.001, longitude: 40.001, timestamp: t0 + 1 }),
    ];
    const r = await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points } });
    t.is(r.status, 201);
    await drained(s);
    const events = (device: string | null) =>
      l.received
        .filter(
          (m) => m.channel === 'geofence' && m.message.data.geofence_id === g.id && m.message.data.device_id === device,
        )
        .map((m) => m.message.data.event);
    await eventually(async () => events('barge-1').length === 2);
    t.deepEqual(events('barge-1'), ['enter', 'exit']);
    t.deepEqual(events('barge-2'), ['enter']);
    // Points without a device identifier form one anonymous track.
    t.deepEqual(events(null), ['enter']);
    t.is(l.received.filter((m) => m.message.data.geofence_id === off.id).length, 0);
  } finally {
    l.close();
  }
});
