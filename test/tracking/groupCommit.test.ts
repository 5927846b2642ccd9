import test from 'ava';
import Redis from 'ioredis';
import { SUBSCRIBER } from '../helpers/pushes';
import pg from 'pg';
import { OUTBOX_RELAY_LOCK, SIDE_EFFECT_OUTBOX } from '../../shared/outbox';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody, make, nowSeconds, once } from '../helpers/tracking';
import { eventually } from '../helpers/wait';

const stack = useStack(test, {
  env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_API_KEY: '100000', RATE_LIMIT_GPS_POST: '100000' },
});

const N = 20;
/** An altitude the test database refuses (a CHECK constraint added for this file): a point that passes validation but fails its INSERT. */
const BAD_ALTITUDE = -20_000;

/** N tracker keys, each linked to its own device, each used once so its credential and link are cached. */
const trackers = once(async () => {
  const s = stack();
  await s.db.raw('ALTER TABLE gps_points ADD CONSTRAINT test_altitude_above_trench CHECK (altitude > -11000)');
  const owner = await createUser(s.db, { roles: ['role_developer'] });
  const list = await Promise.all(
    Array.from({ length: N }, async (_, i) => {
      const key = await createKey({ userId: owner.id, scopes: ['gps:write', 'gps:read'], name: `tracker ${i}` });
      const device = await make(s, owner.token, '/v1/devices', { name: `Boat ${i}`, api_key_id: key.id });
      return { token: key.key, deviceId: device.id as string };
    }),
  );
  for (const t of list) await make(s, t.token, '/v1/gps', gpsBody());
  return list;
});

/**
 * Counts the INSERTs into gps_points this process sends while `fn` runs, at the pg driver (the
 * ingest sends its named statement on a pooled client directly, not through knex's query builder).
 */
async function countGpsInserts<T>(fn: () => Promise<T>): Promise<{ result: T; inserts: number }> {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  let inserts = 0;
  proto.query = function counted(this: unknown, ...args: unknown[]) {
    const q = args[0] as string | { text?: string } | undefined;
    const text = typeof q === 'string' ? q : q?.text;
    if (text && /INSERT INTO gps_points/i.test(text)) inserts++;
    return original.apply(this, args);
  };
  try {
    return { result: await fn(), inserts };
  } finally {
    proto.query = original;
  }
}

test.serial('concurrent single points share INSERTs; each gets its own committed row in its 201', async (t) => {
  const s = stack();
  const list = await trackers();
  // Later than the warm-up points, so each device's latest point is the one of this burst.
  const ts = nowSeconds() + 60;
  const { result, inserts } = await countGpsInserts(() =>
    Promise.all(
      list.map(async (tr, i) => {
        const r = await s.request('POST', '/v1/gps', {
          token: tr.token,
          body: gpsBody({ altitude: i, timestamp: ts }),
        });
        // Read as soon as the answer arrives: the row is committed by then.
        const row = r.status === 201 ? await s.db('gps_points').where('id', r.body.data.id).first() : undefined;
        return { r, row };
      }),
    ),
  );
  t.log(`${inserts} INSERT statements for ${N} concurrent points`);
  t.true(inserts >= 1);
  t.true(inserts <= N / 4, `${inserts} INSERT statements for ${N} concurrent points`);
  result.forEach(({ r, row }, i) => {
    t.is(r.status, 201, r.text);
    const p = r.body.data;
    t.is(p.device_id, list[i].deviceId);
    t.is(p.altitude, i);
    t.is(p.timestamp, new Date(ts * 1000).toISOString());
    t.is(r.body._links.self, `/v1/gps/${p.id}`);
    t.truthy(row, `row of point ${i} not committed when its answer arrived`);
    t.is(row.altitude, i);
    t.is(row.created_at.toISOString(), p.created_at);
  });
  t.is(new Set(result.map(({ r }) => r.body.data.id)).size, N);
  // The latest-point cache was raised before each answer.
  const current = await s.request('GET', `/v1/gps/current?device_id=${encodeURIComponent(list[3].deviceId)}`, {
    token: list[3].token,
  });
  t.is(current.status, 200, current.text);
  t.is(current.body.data.id, result[3].r.body.data.id);
});

test.serial(
  'a point its INSERT refuses fails alone, as it does alone; the others of its burst are stored',
  async (t) => {
    const s = stack();
    const list = await trackers();
    const alone = await s.request('POST', '/v1/gps', {
      token: list[0].token,
      body: gpsBody({ altitude: BAD_ALTITUDE }),
    });
    t.is(alone.status, 400, alone.text);
    const bad = 7;
    const { result, inserts } = await countGpsInserts(() =>
      Promise.all(
        list.map((tr, i) =>
          s.request('POST', '/v1/gps', { token: tr.token, body: gpsBody({ altitude: i === bad ? BAD_ALTITUDE : i }) }),
        ),
      ),
    );
    // The statement of the bad point's group failed, then each point of that group was inserted on its own.
    t.true(inserts >= 2, `${inserts} INSERT statements`);
    for (const [i, r] of result.entries()) {
      if (i === bad) {
        t.is(r.status, alone.status);
        t.deepEqual(r.body, alone.body);
        continue;
      }
      t.is(r.status, 201, r.text);
      t.is(r.body.data.altitude, i);
      t.truthy(await s.db('gps_points').where('id', r.body.data.id).first());
    }
    t.is(await s.db('gps_points').where('altitude', BAD_ALTITUDE).first(), undefined);
  },
);

test.serial(
  'a shared INSERT stores every value exactly as posted: text that needs quoting, nulls, extreme floats',
  async (t) => {
    const s = stack();
    const owner = await createUser(s.db, { roles: ['role_developer'] });
    // Not linked to a device: the body's device_id is stored as given.
    const key = await createKey({ userId: owner.id, scopes: ['gps:write', 'gps:read'], name: 'unlinked' });
    const deviceIds = ['a"b', 'back\\slash', 'NULL', 'null', '{x,y}', 'a,b', "it's", 'ü ∑ 🚤', '"', '\\'];
    const floats = [1e-7, -0.000001, 123456.789012345, 0.1 + 0.2, 5e-324, 179.99999999999997];
    const longitudes = [1e-7, -0.000001, 179.99999999999997, 0.1 + 0.2, 5e-324, -179.123456789];
    const ts = nowSeconds() - 3600;
    const bodies = deviceIds.map((device_id, i) =>
      gpsBody({
        device_id,
        latitude: -89.999999999 + i,
        longitude: longitudes[i % longitudes.length],
        altitude: i % 2 ? null : floats[(i + 1) % floats.length],
        heading: i % 3 ? null : 359.99999,
        timestamp: ts + i,
        speed_kmh: floats[(i + 2) % floats.length] + 1,
        hdop: i % 2 ? 0 : null,
      }),
    );
    const { result, inserts } = await countGpsInserts(() =>
      Promise.all(bodies.map((body) => s.request('POST', '/v1/gps', { token: key.key, body }))),
    );
    t.true(inserts < bodies.length, `${inserts} INSERT statements for ${bodies.length} concurrent points`);
    for (const [i, r] of result.entries()) {
      t.is(r.status, 201, r.text);
      const b = bodies[i];
      const stored = await s.request('GET', `/v1/gps/${r.body.data.id}`, { token: key.key });
      t.is(stored.status, 200, stored.text);
      // What the 201 said is what was stored, and both are what was posted.
      t.deepEqual(stored.body.data, r.body.data);
      const p = stored.body.data;
      t.is(p.device_id, deviceIds[i]);
      for (const f of ['latitude', 'longitude', 'altitude', 'heading', 'speed_kmh', 'hdop'] as const)
        t.is(p[f], b[f] ?? null, `${f} of point ${i}`);
      t.is(p.timestamp, new Date((ts + i) * 1000).toISOString());
      t.is(p.pdop, null);
    }
    // One statement, one created_at: the points of a shared INSERT were created together.
    t.true(new Set(result.map((r) => r.body.data.created_at)).size < bodies.length);
  },
);

test.serial(
  'the points of a shared INSERT share one outbox row; the relay still pushes each, in submission order',
  async (t) => {
    const s = stack();
    const list = await trackers();
    const sub = new Redis(s.config.redisUrl, SUBSCRIBER);
    // Hold the relay (each pass takes this lock) so the burst's outbox rows can be read.
    const hold = await s.db.transaction();
    try {
      const received: string[] = [];
      sub.on('message', (_channel, raw) => received.push(JSON.parse(raw).data.id));
      await sub.subscribe(`${s.config.redisPrefix}ws:gps`);
      await hold.raw('SELECT pg_advisory_xact_lock(?)', [OUTBOX_RELAY_LOCK]);
      const { result, inserts } = await countGpsInserts(() =>
        Promise.all(list.map((tr) => s.request('POST', '/v1/gps', { token: tr.token, body: gpsBody() }))),
      );
      t.true(inserts < N, `${inserts} INSERT statements for ${N} concurrent points`);
      const ids = result.map((r) => {
        t.is(r.status, 201, r.text);
        return r.body.data.id as string;
      });
      const burst = new Set(ids);
      const rows = (
        (await s.db(SIDE_EFFECT_OUTBOX).where('kind', 'gpsPoints').orderBy('id')) as Array<{
          payload: { ids: string[] };
        }>
      ).filter((r) => r.payload.ids.some((id) => burst.has(id)));
      // One row per statement, each carrying its points; together exactly the burst's points.
      t.is(rows.length, inserts);
      t.deepEqual(rows.flatMap((r) => r.payload.ids).sort(), [...ids].sort());
      await hold.rollback();
      // Each point pushed once, in the order of the rows and of the ids within each row.
      const order = rows.flatMap((r) => r.payload.ids);
      // Generous: under a loaded CI host the relay may be backing off; on a miss, say where it stands.
      await eventually(async () => order.every((id) => received.includes(id)), 20_000).catch(async (err) => {
        const left = await s.db(SIDE_EFFECT_OUTBOX).count({ n: '*' }).first();
        const locks = await s.db.raw(`SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory'`);
        t.log({
          received: order.filter((id) => received.includes(id)).length,
          expected: order.length,
          outboxRowsLeft: left?.n,
          advisoryLocks: locks.rows[0].n,
        });
        throw err;
      });
      t.deepEqual(
        received.filter((id) => order.includes(id)),
        order,
      );
    } finally {
      if (!hold.isCompleted()) await hold.rollback();
      sub.disconnect();
    }
  },
);
