import test from 'ava';
import Redis from 'ioredis';
import { SUBSCRIBER } from '../helpers/pushes';
import { PubSub } from '../../shared/events';
import { redisKey } from '../../shared/redis';
import { OUTBOX_RELAY_LOCK, SIDE_EFFECT_OUTBOX } from '../../shared/outbox';
import { createUser, TestUser } from '../helpers/factories';
import { PrivateRedis, startPrivateRedis } from '../helpers/redisServer';
import { Stack, startStack } from '../helpers/stack';
import { connect, wsBase } from '../helpers/wsClient';
import { countRows, gpsBody, make, nowSeconds } from '../helpers/tracking';
import { eventually, sleep, timed } from '../helpers/wait';

// One private redis-server that the tests stop and restart, and one stack pointed at it: serial.
let redis: PrivateRedis;
let s: Stack;
let dev: TestUser;

test.before(async () => {
  redis = await startPrivateRedis();
  s = await startStack({
    env: { REDIS_URL: redis.url, RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' },
    workers: true,
    realtime: 1,
  });
  dev = await createUser(s.db, { roles: ['role_developer'] });
});

test.after.always(async () => {
  await redis?.start().catch(() => undefined);
  await s?.close();
  await redis?.stop();
});

/** The ids in order of first appearance (a relay may re-publish after a failure: at-least-once). */
const firstSeen = (ids: string[]) => ids.filter((id, i) => ids.indexOf(id) === i);

test.serial(
  'with Redis stopped, GET /v1/gps/current and POST /v1/gps answer 2xx within 2 s (current from the database)',
  async (t) => {
    const device = `outage-latency-${Date.now()}`;
    await make(s, dev.token, '/v1/gps', gpsBody({ device_id: device, timestamp: nowSeconds() - 10 }));
    t.is((await s.request('GET', `/v1/gps/current?device_id=${device}`, { token: dev.token })).status, 200);
    await redis.stop();
    try {
      const latencies: number[] = [];
      for (let i = 0; i < 3; i++) {
        const post = await timed(() =>
          s.request('POST', '/v1/gps', {
            token: dev.token,
            body: gpsBody({ device_id: device, timestamp: nowSeconds() + i }),
          }),
        );
        t.is(post.result.status, 201, post.result.text);
        const current = await timed(() =>
          s.request('GET', `/v1/gps/current?device_id=${device}`, { token: dev.token }),
        );
        t.is(current.result.status, 200, current.result.text);
        // The cache is unreachable: the answer is the database's newest point, the one just posted.
        t.is(current.result.body.data.id, post.result.body.data.id);
        latencies.push(post.ms, current.ms);
      }
      const health = await timed(() => s.request('GET', '/v1/health'));
      t.is(health.result.status, 503);
      t.is(health.result.body.services.cache.status, 'down');
      latencies.push(health.ms);
      t.log(`latencies with Redis down (ms): ${latencies.map((ms) => ms.toFixed(0)).join(', ')}`);
      for (const ms of latencies) t.true(ms < 2000, `a request took ${ms.toFixed(0)} ms`);
    } finally {
      await redis.start();
    }
  },
);

test.serial(
  'points accepted while Redis is down get their gpsUpdate pushes in order and their geofence evaluation once it is back',
  async (t) => {
    const device = `outage-${Date.now()}`;
    const fence = await make(s, dev.token, '/v1/geofences', {
      name: 'Outage harbour',
      latitude: 48.1,
      longitude: 11.5,
      radius_km: 1,
    });
    await redis.stop();
    const posted: string[] = [];
    try {
      const t0 = nowSeconds();
      // Outside, outside, then a batch ending inside the geofence: one 'enter' once evaluated.
      for (const [i, lat] of [48.3, 48.25].entries()) {
        const body = gpsBody({ device_id: device, latitude: lat, longitude: 11.5, timestamp: t0 + i });
        const r = await s.request('POST', '/v1/gps', { token: dev.token, body });
        t.is(r.status, 201, r.text);
        posted.push(r.body.data.id);
      }
      const batch = await s.request('POST', '/v1/gps/batch', {
        token: dev.token,
        body: {
          points: [2, 3, 4].map((i) =>
            gpsBody({ device_id: device, latitude: i === 4 ? 48.1001 : 48.2, longitude: 11.5, timestamp: t0 + i }),
          ),
        },
      });
      t.is(batch.status, 201, batch.text);
      posted.push(...batch.body.data.accepted.map((a: { id: string }) => a.id));
      t.true((await countRows(s.db(SIDE_EFFECT_OUTBOX))) >= 3, 'the side effects wait in the outbox');
    } catch (err) {
      await redis.start();
      throw err;
    }
    // Hold the relays (each pass takes this lock) until the subscriber below listens, then restart Redis.
    const hold = await s.db.transaction();
    await hold.raw('SELECT pg_advisory_xact_lock(?)', [OUTBOX_RELAY_LOCK]);
    await redis.start();
    const conn = await connect(wsBase(s, 0), { token: dev.token });
    try {
      t.like(await conn.subscribe('gps'), { type: 'message' });
      t.like(await conn.subscribe('geofence'), { type: 'message' });
      // Realtime resubscribes to Redis on its own schedule: wait until a probe push gets through.
      await eventually(async () => {
        await s.api.services.bus
          .publish('gps', { type: 'message', channel: 'probe', data: 'probe' })
          .catch(() => undefined);
        return conn.frames.some((f) => f.kind === 'json' && f.data.channel === 'probe');
      }, 20_000);
      await hold.commit();

      const pushes: string[] = [];
      await eventually(async () => {
        const mine = (x: (typeof conn.frames)[number]) =>
          x.kind === 'json' && x.data.type === 'gpsUpdate' && x.data.data.device_id === device;
        for (let f; (f = conn.frames.findIndex(mine)) >= 0;) {
          pushes.push((conn.frames.splice(f, 1)[0] as { data: { data: { id: string } } }).data.data.id);
        }
        return firstSeen(pushes).length >= posted.length;
      }, 20_000);
      t.deepEqual(firstSeen(pushes), posted, 'every point pushed, in the order it was accepted');

      const enter = await conn.nextJson((m) => m.type === 'geofenceEvent' && m.data.device_id === device, 20_000);
      t.like(enter.data, { geofence_id: fence.id, event: 'enter', device_id: device });
      await eventually(async () => (await countRows(s.db(SIDE_EFFECT_OUTBOX))) === 0, 10_000);
      t.pass();
    } finally {
      conn.close();
      if (!hold.isCompleted()) await hold.rollback();
    }
  },
);

test.serial(
  'after a Redis restart the backlog waits for the realtime instances to subscribe again: one that is back late still gets it',
  async (t) => {
    const device = `resubscribe-${Date.now()}`;
    const config = s.api.services.config;
    const pattern = redisKey(config, PubSub.wsPattern);
    const channel = redisKey(config, PubSub.ws(`gps:${device}`));
    // A second realtime instance, as pub/sub sees one: a pattern subscriber. It does not reconnect
    // by itself; it comes back a while after Redis does, as a slow instance would.
    const got: string[] = [];
    const listen = async () => {
      const sub = new Redis(redis.url, { ...SUBSCRIBER, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      sub.on('error', () => undefined);
      sub.on('pmessage', (_p: string, ch: string, text: string) => {
        const m = JSON.parse(text) as { type: string; data: { id: string } };
        if (ch === channel && m.type === 'gpsUpdate') got.push(m.data.id);
      });
      await sub.psubscribe(pattern);
      return sub;
    };
    let late = await listen();
    try {
      const first = await make(s, dev.token, '/v1/gps', gpsBody({ device_id: device, timestamp: nowSeconds() - 5 }));
      await eventually(async () => got.includes(first.id));
      // Long enough for every relay (api and workers) to have counted the subscribers (each counts
      // every 2 s when idle, on its 500 ms poll).
      await sleep(3500);
      await redis.stop();
      const posted: string[] = [];
      try {
        for (let i = 0; i < 2; i++) {
          const r = await s.request('POST', '/v1/gps', {
            token: dev.token,
            body: gpsBody({ device_id: device, timestamp: nowSeconds() - 4 + i }),
          });
          t.is(r.status, 201, r.text);
          posted.push(r.body.data.id);
        }
      } finally {
        await redis.start();
      }
      // The relays see Redis again at once; the late instance subscribes 2.5 s later.
      await sleep(2500);
      late.disconnect();
      late = await listen();
      await eventually(async () => posted.every((id) => got.includes(id)), 15_000);
      t.deepEqual(
        got.filter((id) => posted.includes(id)).filter((id, i, all) => all.indexOf(id) === i),
        posted,
        'the points accepted during the outage reach the late instance, in order',
      );
      await eventually(async () => (await countRows(s.db(SIDE_EFFECT_OUTBOX))) === 0, 10_000);
    } finally {
      late.disconnect();
    }
  },
);
