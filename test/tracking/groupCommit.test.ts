import test from 'ava';
import pg from 'pg';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody, make, nowSeconds, once } from '../helpers/tracking';

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
