import test from 'ava';
import { useStack } from '../helpers/stack';
import { adminAndDeveloper, gpsBody, make, nowSeconds } from '../helpers/tracking';
import { connect, Frame, WsConn, wsBase } from '../helpers/wsClient';

// A push goes out on `gps` and `gps:<device>` (`geofence` and `geofence:<id>`) and carries no
// channel field: a connection reading both channels gets it once, a connection reading one of them
// gets it from that one.
const stack = useStack(test, {
  realtime: 1,
  workers: true,
  env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000', WS_MAX_MESSAGES_PER_10S: '1000' },
});
const users = adminAndDeveloper(stack);

/** Every frame of `type` the connection gets until it has been quiet for a moment. */
async function all(conn: WsConn, type: string): Promise<any[]> {
  const got: any[] = [];
  const match = (f: Frame) => f.kind === 'json' && f.data.type === type;
  for (;;) {
    try {
      got.push(((await conn.next(match, 700)) as { data: unknown }).data);
    } catch {
      return got;
    }
  }
}

async function subscribed(token: string, channels: string[]): Promise<WsConn> {
  const conn = await connect(wsBase(stack(), 0), { token });
  for (const ch of channels) {
    const r = await conn.subscribe(ch);
    if (r.type !== 'message') throw new Error(JSON.stringify(r));
  }
  return conn;
}

test.serial('a gpsUpdate reaches a connection on gps and gps:<device> once', async (t) => {
  const s = stack();
  const { developer } = await users();
  const both = await subscribed(developer.token, ['gps', 'gps:mirror-dev']);
  const device = await subscribed(developer.token, ['gps:mirror-dev']);
  const global = await subscribed(developer.token, ['gps']);
  try {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await s.request('POST', '/v1/gps', {
        token: developer.token,
        body: gpsBody({ device_id: 'mirror-dev', timestamp: nowSeconds() - 10 + i }),
      });
      t.is(r.status, 201, r.text);
      ids.push(r.body.data.id);
    }
    const [b, d, g] = await Promise.all([all(both, 'gpsUpdate'), all(device, 'gpsUpdate'), all(global, 'gpsUpdate')]);
    for (const [name, got] of [
      ['both', b],
      ['device', d],
      ['global', g],
    ] as const)
      t.deepEqual(
        got.map((m) => m.data.id),
        ids,
        name,
      );
  } finally {
    both.close();
    device.close();
    global.close();
  }
});

test.serial('a geofenceEvent reaches a connection on geofence and geofence:<id> once', async (t) => {
  const s = stack();
  const { developer } = await users();
  const g = await make(s, developer.token, '/v1/geofences', {
    name: 'mirror',
    latitude: 10,
    longitude: 10,
    radius_km: 1,
  });
  const both = await subscribed(developer.token, ['geofence', `geofence:${g.id}`]);
  const one = await subscribed(developer.token, [`geofence:${g.id}`]);
  try {
    for (const [i, lat] of [20, 10, 20].entries()) {
      const r = await s.request('POST', '/v1/gps', {
        token: developer.token,
        body: gpsBody({ device_id: 'fence-dev', latitude: lat, longitude: 10, timestamp: nowSeconds() - 10 + i }),
      });
      t.is(r.status, 201, r.text);
    }
    const [b, o] = await Promise.all([all(both, 'geofenceEvent'), all(one, 'geofenceEvent')]);
    t.deepEqual(
      b.map((m) => m.data.event),
      ['enter', 'exit'],
    );
    t.deepEqual(
      o.map((m) => m.data.event),
      ['enter', 'exit'],
    );
  } finally {
    both.close();
    one.close();
  }
});
