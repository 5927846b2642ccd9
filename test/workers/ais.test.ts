import test from 'ava';
import { spawnService } from '../helpers/processes';
import {
  CORRUPT,
  freeUdpPort,
  lines,
  positionSentence,
  rawPosition,
  SAMPLES,
  sendUdp,
  tcpNmeaServer,
} from '../helpers/nmea';
import { startStack, Stack } from '../helpers/stack';
import { sleep, eventually } from '../helpers/wait';
import { connect, wsBase, WsConn } from '../helpers/wsClient';

type Vessel = Record<string, unknown> & { mmsi: number };

/** An anonymous WebSocket client on `vessels` that merges every vesselsUpdate it receives. */
async function vesselWatcher(s: Stack) {
  const conn: WsConn = await connect(wsBase(s));
  const reply = await conn.subscribe('vessels');
  const pushes: Array<{ at: number; vessels: Vessel[] }> = [];
  const latest = new Map<number, Vessel>();
  conn.ws.on('message', (data: Buffer) => {
    const m = JSON.parse(data.toString());
    if (m.type !== 'vesselsUpdate') return;
    pushes.push({ at: Date.now(), vessels: m.data.vessels });
    for (const v of m.data.vessels) latest.set(v.mmsi, v);
  });
  return { conn, reply, pushes, latest, close: () => conn.close() };
}

const EVER_DIADEM = {
  mmsi: 351759000,
  name: 'EVER DIADEM',
  ship_type: 70,
  ship_type_label: 'Cargo, all ships of this type',
  length: 225 + 70,
  beam: 1 + 31,
};

test('TCP feed: published sentences decoded, merged and pushed to an anonymous client; a bad checksum is counted', async (t) => {
  // The samples go out on the first connection only, so the counters are exact even after a reconnect.
  const feed = await tcpNmeaServer((socket, i) => {
    if (i === 0)
      socket.write(
        lines(SAMPLES.type1, [CORRUPT], SAMPLES.type5, SAMPLES.type18, SAMPLES.type24a, SAMPLES.type24b, ['garbage']),
      );
  });
  const s = await startStack({ workers: true, realtime: 1, env: { AIS_FEED_URL: feed.url, AIS_LEASE_MS: '3000' } });
  const w = await vesselWatcher(s);
  try {
    t.is(w.reply.type, 'message');
    await eventually(() => w.latest.size >= 4 && w.latest.get(271041815)?.length === 15, 20_000).catch((err) => {
      throw new Error(
        `${err.message}: vessels ${JSON.stringify([...w.latest.values()])}; connections ${feed.connections}`,
      );
    });
    // The decoder's reading of the raw bits agrees with the published decode too.
    const raw = rawPosition(SAMPLES.type1[0]);
    t.deepEqual([raw.type, raw.mmsi], [1, 477553000]);
    t.deepEqual(w.latest.get(477553000), {
      mmsi: 477553000,
      name: null,
      ship_type: null,
      ship_type_label: null,
      nav_status: 5,
      nav_status_label: 'Moored',
      length: null,
      beam: null,
      lat: Math.round(raw.lat * 1e6) / 1e6,
      lng: Math.round(raw.lng * 1e6) / 1e6,
      heading: 181,
      course: 51,
      speed_kmh: 0,
    });
    t.is(w.latest.get(477553000)!.lat, 47.582833);
    t.is(w.latest.get(477553000)!.lng, -122.345833);
    t.like(w.latest.get(351759000), { ...EVER_DIADEM, lat: null, lng: null, nav_status: null, speed_kmh: null });
    // Class B: heading 511 is "not available"; 0.1 kn is 0.19 km/h.
    t.like(w.latest.get(338087471), {
      lat: 40.68454,
      lng: -74.072132,
      heading: null,
      course: 79.6,
      speed_kmh: 0.19,
      nav_status: null,
      nav_status_label: null,
    });
    // Type 24 A (name) and B (type, dimensions) merged into one vessel.
    t.like(w.latest.get(271041815), {
      name: 'PROGUY',
      ship_type: 60,
      ship_type_label: 'Passenger, all ships of this type',
      length: 15,
      beam: 5,
    });
    for (const v of w.latest.values())
      t.deepEqual(Object.keys(v).sort(), [
        'beam',
        'course',
        'heading',
        'lat',
        'length',
        'lng',
        'mmsi',
        'name',
        'nav_status',
        'nav_status_label',
        'ship_type',
        'ship_type_label',
        'speed_kmh',
      ]);
    let last: unknown;
    const health = await eventually(async () => {
      const h = (await s.request('GET', '/v1/health')).body;
      last = h.services;
      return h.services.ais.vessels === 4 && h.services.ais.sentences === 6 ? h : null;
    }, 10_000).catch((err) => {
      throw new Error(`${err.message}: ${JSON.stringify(last)}`);
    });
    t.like(health.services.ais, { configured: true, connected: true, sentences: 6, errors: 2, vessels: 4 });

    // Static then position for the same MMSI: merged, and the push carries only what changed.
    const before = w.pushes.length;
    for (const sock of feed.sockets) sock.write(lines(SAMPLES.type1, SAMPLES.type1, SAMPLES.type1b));
    await eventually(() => w.latest.has(371798000), 5000);
    await sleep(1500);
    const after = w.pushes.slice(before);
    t.deepEqual(
      after.map((p) => p.vessels.map((v) => v.mmsi)),
      [[371798000]],
      'an unchanged vessel is not pushed again',
    );
    t.like(w.latest.get(371798000), { nav_status: 0, speed_kmh: 22.78, course: 224, heading: 215 });
  } finally {
    w.close();
    await s.close();
    await feed.close();
  }
});

test('batching: thousands of sentences in a few seconds give at most one push per second', async (t) => {
  const feed = await tcpNmeaServer(() => undefined);
  const s = await startStack({ workers: true, realtime: 1, env: { AIS_FEED_URL: feed.url, AIS_LEASE_MS: '3000' } });
  const w = await vesselWatcher(s);
  try {
    await eventually(() => feed.open === 1, 10_000);
    const [sock] = feed.sockets;
    // 2.5 s of a busy feed: 50 writes of 100 sentences, every vessel moving each time.
    const start = Date.now();
    for (let step = 0; step < 50; step++) {
      sock.write(lines(Array.from({ length: 100 }, (_, i) => positionSentence(i, step))));
      await sleep(50);
    }
    await sleep(1500);
    const span = (Date.now() - start) / 1000;
    t.true(w.pushes.length >= 2, `pushes: ${w.pushes.length}`);
    t.true(w.pushes.length <= Math.ceil(span) + 1, `${w.pushes.length} pushes in ${span} s`);
    // A second apart when published; single gaps at the client jitter on a busy machine, the mean does not.
    const n = w.pushes.length;
    const meanGap = (w.pushes[n - 1].at - w.pushes[0].at) / (n - 1);
    t.true(meanGap >= 800, `mean gap ${meanGap} ms`);
    t.true(w.pushes.every((p) => new Set(p.vessels.map((v) => v.mmsi)).size === p.vessels.length));
  } finally {
    w.close();
    await s.close();
    await feed.close();
  }
});

test('a dropped TCP connection is reconnected and the feed resumes', async (t) => {
  // Pushes carry only the vessels changed since the last one: the first sentence waits until the
  // client is subscribed, or on a slow machine it could be pushed (once) before anyone listens.
  let watching: () => void = () => undefined;
  const subscribed = new Promise<void>((r) => (watching = r));
  const feed = await tcpNmeaServer((socket, i) => {
    if (i === 0)
      void subscribed.then(() => socket.end(lines(SAMPLES.type1))); // first connection: one sentence, then closed
    else socket.write(lines(SAMPLES.type1b));
  });
  const s = await startStack({ workers: true, realtime: 1, env: { AIS_FEED_URL: feed.url, AIS_LEASE_MS: '3000' } });
  const w = await vesselWatcher(s);
  watching();
  try {
    await eventually(() => w.latest.has(371798000), 15_000);
    t.true(w.latest.has(477553000));
    t.true(feed.connections >= 2);
  } finally {
    w.close();
    await s.close();
    await feed.close();
  }
});

test('UDP feed: datagrams with a two-part type 5, type 19 and type 24 A/B are decoded', async (t) => {
  const port = await freeUdpPort();
  const s = await startStack({
    workers: true,
    realtime: 1,
    env: { AIS_FEED_URL: `udp://127.0.0.1:${port}`, AIS_LEASE_MS: '3000' },
  });
  const w = await vesselWatcher(s);
  try {
    // The socket binds once the lease is taken: send until the vessel shows up.
    await eventually(
      async () => {
        await sendUdp(port, [...SAMPLES.type5, ...SAMPLES.type24a, ...SAMPLES.type24b, ...SAMPLES.type19, CORRUPT]);
        return w.latest.get(271041815)?.ship_type === 60 && w.latest.has(351759000) && w.latest.has(367059850);
      },
      15_000,
      300,
    );
    t.like(w.latest.get(351759000), EVER_DIADEM);
    t.like(w.latest.get(271041815), { name: 'PROGUY', length: 15, beam: 5 });
    // Type 19: position and static data in one report; class B has no navigational status.
    t.like(w.latest.get(367059850), {
      name: 'CAPT.J.RIMES',
      ship_type: 70,
      length: 26,
      beam: 8,
      lat: 29.543695,
      lng: -88.810392,
      course: 335.9,
      speed_kmh: 16.11,
      heading: null,
      nav_status: null,
    });
    const h = await eventually(async () => {
      const b = (await s.request('GET', '/v1/health')).body;
      return b.services.ais.errors > 0 ? b : null;
    });
    t.true(h.services.ais.connected);
  } finally {
    w.close();
    await s.close();
  }
});

test('two worker processes: one feed consumer, taken over within seconds when it dies', async (t) => {
  const feed = await tcpNmeaServer((socket) => socket.write(lines(SAMPLES.type1)));
  const s = await startStack({ env: { AIS_FEED_URL: feed.url, AIS_LEASE_MS: '2000' } });
  const a = await spawnService('workers', s.env, 'workers ready');
  const b = await spawnService('workers', s.env, 'workers ready');
  try {
    await eventually(() => feed.open === 1, 10_000);
    // Several lease periods later, still exactly one connection.
    for (let i = 0; i < 10; i++) {
      await sleep(300);
      t.is(feed.open, 1);
    }
    t.is(feed.connections, 1);
    const holder = a.logs.some((l) => l.msg === 'ais feed lease acquired') ? a : b;
    const other = holder === a ? b : a;
    const killedAt = Date.now();
    await holder.kill(); // SIGKILL: no chance to give the lease back
    await other.waitForLog('ais feed lease acquired', 10_000);
    await eventually(() => feed.connections === 2 && feed.open === 1, 10_000);
    const took = Date.now() - killedAt;
    t.true(took < 8000, `takeover took ${took} ms`);
    await sleep(1000);
    t.is(feed.open, 1);
  } finally {
    await a.kill();
    await b.kill();
    await s.close();
    await feed.close();
  }
});
