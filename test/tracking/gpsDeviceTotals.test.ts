import test, { ExecutionContext } from 'ava';
import { down, up } from '../../migrations/20261207000000_gps_points_by_device';
import { OFF_DEVICE_COUNTED } from '../../shared/queries/counters';
import { createUser } from '../helpers/factories';
import { explainPrepared, statementsWhile } from '../helpers/statements';
import { useStack } from '../helpers/stack';
import { gpsBody, make, once } from '../helpers/tracking';

// GET /v1/gps?device_id= takes its exact total from the device's keyed row counter
// (gps_points_by_device, migration 20261207000000) and reads deep pages from the end; with trip_id
// too, from the trip's stored count less its points off the device (tripPointsOfDevice).
const stack = useStack(test, { env: { RATE_LIMIT_GPS_POST: '10000', RATE_LIMIT_USER: '10000' } });

const users = once(async () => {
  const s = stack();
  const [developer, reader] = await Promise.all([
    createUser(s.db, { roles: ['role_developer'] }),
    createUser(s.db, { roles: ['role_api_read_only'] }),
  ]);
  return { developer, reader };
});

/** Inserts `n` points of `device` with many equal timestamps and creation times (ties broken by id). */
async function insertPoints(device: string | null, n: number, tripId: string | null = null): Promise<void> {
  await stack().db.raw(
    `INSERT INTO gps_points (latitude, longitude, timestamp, speed_kmh, speed_mps, speed_mph, speed_knots, device_id, trip_id, created_at)
     SELECT 1, 1, timestamp '2026-01-01' + (g / 7) * interval '1 second', 0, 0, 0, 0, ?, ?,
            timestamp '2026-01-02' + (g % 5) * interval '1 second'
       FROM generate_series(1, ?::int) g`,
    [device, tripId, n],
  );
}

/** The device's points counted, and one page of them read forward with OFFSET, in SQL. */
async function expected(device: string, limit: number, offset: number): Promise<{ total: number; ids: string[] }> {
  const db = stack().db;
  const { rows } = await db.raw(`SELECT count(*)::int AS n FROM gps_points WHERE device_id = ?`, [device]);
  const page = await db.raw(
    `SELECT id FROM gps_points WHERE device_id = ? ORDER BY timestamp DESC, created_at DESC, id DESC LIMIT ? OFFSET ?`,
    [device, limit, offset],
  );
  return { total: rows[0].n, ids: page.rows.map((r: { id: string }) => r.id) };
}

/** The statements (with bindings) the api sends while `fn` runs. */
const captured = <T>(fn: () => Promise<T>) => statementsWhile(stack().db, fn);

test.serial("a device's pages and totals are exact, and deep pages are read from the end", async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const device = 'totals-a';
  const trip = await make(s, developer.token, '/v1/trips', { name: 'device totals' });
  // The device's points between other devices' and points without a device; some on a trip.
  await insertPoints(device, 2300);
  await insertPoints('totals-b', 900);
  await insertPoints(null, 150);
  await insertPoints(device, 250, trip.id);

  /** Every case's page equals the forward OFFSET read, its total the count; reversed past the middle. */
  const check = async (when: string) => {
    const { total } = await expected(device, 1, 0);
    for (const [limit, page] of [
      [100, 1],
      [100, 11],
      [100, 14],
      [100, Math.ceil(total / 100)],
      [7, 200],
      [7, Math.ceil(total / 7)],
      [10, 3],
    ]) {
      const offset = (page - 1) * limit;
      const { result: r, statements } = await captured(() =>
        s.request('GET', `/v1/gps?device_id=${device}&limit=${limit}&page=${page}`, { token: reader.token }),
      );
      const want = await expected(device, limit, offset);
      const label = `${when}: limit ${limit} page ${page}`;
      t.is(r.status, 200, r.text);
      t.deepEqual(
        r.body.data.map((x: { id: string }) => x.id),
        want.ids,
        label,
      );
      t.is(r.body.pagination.total, want.total, label);
      t.is(r.body.pagination.total_pages, Math.ceil(want.total / limit), label);
      // The total is the device's counter: no statement counts the device's points.
      const points = statements.filter((q) => /\bgps_points\b/.test(q.sql));
      t.false(
        statements.some((q) => /count\(\*\)/i.test(q.sql) && /\bgps_points\b/.test(q.sql)),
        `${label}: ${points.map((q) => q.sql).join(' | ')}`,
      );
      t.true(
        statements.some((q) => /\brow_counters\b/.test(q.sql) && q.bindings.includes(`gps_points_by_device:${device}`)),
        `${label}: the device's counter is read`,
      );
      // Past the middle (and at least DEEP_OFFSET in), the rows are read in the reversed order at
      // the offset from the end; before it, forward at the offset asked for.
      const fromEnd = offset >= 1000 && offset > total - offset - limit;
      const reversed = points.filter((q) => q.sql.includes('"id" ASC'));
      t.is(reversed.length, fromEnd ? 1 : 0, `${label}: ${points.map((q) => q.sql).join(' | ')}`);
      if (fromEnd && total - offset - limit > 0) t.true(reversed[0].bindings.includes(total - offset - limit), label);
    }
    const past = await s.request('GET', `/v1/gps?device_id=${device}&limit=100&page=${Math.ceil(total / 100) + 1}`, {
      token: reader.token,
    });
    t.deepEqual(past.body.data, []);
    t.is(past.body.pagination.total, total, `${when}: past the end`);
  };
  await check('inserted in SQL');

  // Every kind of write: deleted points, points moved to another device, a batch and single points
  // through the API (one multi-row INSERT per batch and per group commit), a rolled-back write.
  await s.db.raw(`DELETE FROM gps_points WHERE id IN (SELECT id FROM gps_points WHERE device_id = ? LIMIT 37)`, [
    device,
  ]);
  await s.db.raw(
    `UPDATE gps_points SET device_id = 'totals-b' WHERE id IN (SELECT id FROM gps_points WHERE device_id = ? LIMIT 20)`,
    [device],
  );
  await s.db.raw(
    `UPDATE gps_points SET device_id = ? WHERE id IN (SELECT id FROM gps_points WHERE device_id IS NULL LIMIT 5)`,
    [device],
  );
  const batch = await s.request('POST', '/v1/gps/batch', {
    token: developer.token,
    body: {
      points: Array.from({ length: 30 }, (_, i) =>
        gpsBody({ device_id: i % 3 ? device : 'totals-b', timestamp: 1_767_225_600 + i }),
      ),
    },
  });
  t.is(batch.status, 201, batch.text);
  const single = await Promise.all(
    [0, 1, 2].map((i) =>
      s.request('POST', '/v1/gps', {
        token: developer.token,
        body: gpsBody({ device_id: device, timestamp: 1_767_225_700 + i }),
      }),
    ),
  );
  t.true(single.every((r) => r.status === 201));
  await s.db
    .transaction(async (trx) => {
      await trx.raw(`DELETE FROM gps_points WHERE device_id = ?`, [device]);
      throw new Error('rolled back');
    })
    .catch(() => undefined);
  await check('after deletes, moves, API inserts and a rollback');
  t.is((await expected(device, 1, 0)).total, 2300 + 250 - 37 - 20 + 5 + 20 + 3);
  t.is((await expected('totals-b', 1, 0)).total, 900 + 20 + 10);
});

test.serial("the total is read from the device's counter, not counted", async (t) => {
  const s = stack();
  const { reader } = await users();
  const device = 'planted';
  await insertPoints(device, 12);
  const page = async () =>
    (await s.request('GET', `/v1/gps?device_id=${device}&limit=5`, { token: reader.token })).body.pagination.total;
  t.is(await page(), 12);
  // A planted shard of the counter is what the page says.
  await s.db('row_counters').insert({ counter: `gps_points_by_device:${device}`, shard: 999, n: 1000 });
  t.is(await page(), 1012);
  await s
    .db('row_counters')
    .where({ counter: `gps_points_by_device:${device}`, shard: 999 })
    .delete();
  t.is(await page(), 12);
});

/** A trip's points on one device (both filters): a page read forward with OFFSET, and the count, in SQL. */
async function expectedBoth(
  device: string,
  tripId: string,
  limit: number,
  offset: number,
): Promise<{ total: number; ids: string[] }> {
  const db = stack().db;
  const { rows } = await db.raw(`SELECT count(*)::int AS n FROM gps_points WHERE device_id = ? AND trip_id = ?`, [
    device,
    tripId,
  ]);
  const page = await db.raw(
    `SELECT id FROM gps_points WHERE device_id = ? AND trip_id = ?
      ORDER BY timestamp DESC, created_at DESC, id DESC LIMIT ? OFFSET ?`,
    [device, tripId, limit, offset],
  );
  return { total: rows[0].n, ids: page.rows.map((r: { id: string }) => r.id) };
}

/** Every node of a JSON plan (explainPrepared), depth first. */
function nodesOf(plan: string): Array<Record<string, unknown>> {
  const walk = (n: Record<string, unknown>): Array<Record<string, unknown>> => [
    n,
    ...((n.Plans as Array<Record<string, unknown>> | undefined) ?? []).flatMap(walk),
  ];
  return walk((JSON.parse(plan) as Array<{ Plan: Record<string, unknown> }>)[0].Plan);
}

/**
 * A statement on gps_points, as the api sent it, under the generic and the custom plan: read off
 * an index in order (no sort, no sequential scan, no intersection of two indexes), and reading at
 * most `bound` rows or index entries of gps_points in all, not every match.
 */
async function assertIndexed(
  t: ExecutionContext,
  statement: { sql: string; bindings: unknown[] },
  bound: number,
  label: string,
): Promise<void> {
  for (const mode of ['generic', 'custom'] as const) {
    const nodes = nodesOf(await explainPrepared(stack().db, statement, mode));
    const kinds = nodes.map((n) => `${String(n['Node Type'])}${n['Index Name'] ? ` ${String(n['Index Name'])}` : ''}`);
    t.false(
      kinds.some((k) => /Sort|Seq Scan|BitmapAnd/.test(k)),
      `${label} (${mode}): ${kinds.join(', ')}`,
    );
    const read = nodes
      .filter((n) => n['Relation Name'] === 'gps_points' || /^gps_points/.test(String(n['Index Name'] ?? '')))
      .reduce((sum, n) => sum + Number(n['Actual Rows']) * Number(n['Actual Loops']), 0);
    t.true(read <= bound, `${label} (${mode}): read ${read} rows of gps_points, at most ${bound} expected`);
  }
}

test.serial(
  "a trip's points on one device: exact total without counting them, pages off the index, deep pages from the end",
  async (t) => {
    const s = stack();
    const { developer, reader } = await users();
    const [trip, other] = [
      await make(s, developer.token, '/v1/trips', { name: 'device and trip' }),
      await make(s, developer.token, '/v1/trips', { name: 'device and trip, other' }),
    ];
    // The device's points on the trip, on no trip and on another trip; the trip's points on devices
    // named before and after it, and on none.
    await insertPoints('both', 1300, trip.id);
    await insertPoints('both', 25);
    await insertPoints('both', 40, other.id);
    await insertPoints('a-before', 60, trip.id);
    await insertPoints('z-after', 45, trip.id);
    await insertPoints(null, 30, trip.id);
    const offDevice = 60 + 45 + 30;

    const check = async (when: string) => {
      const { total } = await expectedBoth('both', trip.id, 1, 0);
      for (const [limit, page] of [
        [100, 1],
        [100, 7],
        [100, 11],
        [100, Math.ceil(total / 100)],
        [7, 150],
        [7, Math.ceil(total / 7)],
        [10, 3],
        [100, Math.ceil(total / 100) + 1],
      ]) {
        const offset = (page - 1) * limit;
        const label = `${when}: limit ${limit} page ${page}`;
        const { result: r, statements } = await captured(() =>
          s.request('GET', `/v1/gps?device_id=both&trip_id=${trip.id}&limit=${limit}&page=${page}`, {
            token: reader.token,
          }),
        );
        const want = await expectedBoth('both', trip.id, limit, offset);
        t.is(r.status, 200, r.text);
        t.deepEqual(
          r.body.data.map((x: { id: string }) => x.id),
          want.ids,
          label,
        );
        t.is(r.body.pagination.total, want.total, label);
        t.is(r.body.pagination.total_pages, Math.max(1, Math.ceil(want.total / limit)), label);
        // The list's statements (not the relay's, which reads the points the batch below wrote).
        const points = statements.filter((q) => /from "gps_points"|__page_total/.test(q.sql));
        // The total starts from the trip's stored count.
        t.true(
          points.some((q) => /\btrip_track_stats\b/.test(q.sql)),
          label,
        );
        // Past the middle (and at least DEEP_OFFSET in), read in the reversed order from the end.
        const fromEnd = offset >= 1000 && offset > total - offset - limit;
        t.is(points.filter((q) => q.sql.includes('"id" ASC')).length, fromEnd && offset < total ? 1 : 0, label);
        // Neither the page nor the total reads every match: at most the rows OFFSET skips (from
        // the nearer end), the page, the points off the device (counted to subtract them; a bitmap
        // scan counts them as index entries and as rows) and a few index entries either side.
        const skipped = fromEnd ? Math.max(0, total - offset - limit) : Math.min(offset, total);
        for (const q of points) await assertIndexed(t, q, skipped + limit + 2 * offDevice + 10, label);
      }
    };
    await check('inserted in SQL');

    // Moves off and onto the device, deletes and points through the API keep the total exact.
    await s.db.raw(
      `UPDATE gps_points SET device_id = 'z-after' WHERE id IN (SELECT id FROM gps_points WHERE device_id = 'both' AND trip_id = ? LIMIT 12)`,
      [trip.id],
    );
    await s.db.raw(
      `UPDATE gps_points SET device_id = 'both' WHERE id IN (SELECT id FROM gps_points WHERE device_id IS NULL AND trip_id = ? LIMIT 4)`,
      [trip.id],
    );
    await s.db.raw(
      `DELETE FROM gps_points WHERE id IN (SELECT id FROM gps_points WHERE device_id = 'both' AND trip_id = ? LIMIT 9)`,
      [trip.id],
    );
    const batch = await s.request('POST', '/v1/gps/batch', {
      token: developer.token,
      body: {
        points: Array.from({ length: 20 }, (_, i) =>
          gpsBody({ device_id: i % 4 ? 'both' : 'a-before', trip_id: trip.id, timestamp: 1_767_225_600 + i }),
        ),
      },
    });
    t.is(batch.status, 201, batch.text);
    await check('after moves, deletes and API inserts');
    t.is((await expectedBoth('both', trip.id, 1, 0)).total, 1300 - 12 + 4 - 9 + 15);

    // A device with no point on the trip, and a trip with no point at all.
    const none = await s.request('GET', `/v1/gps?device_id=nobody&trip_id=${trip.id}`, { token: reader.token });
    t.deepEqual([none.status, none.body.pagination.total, none.body.data], [200, 0, []]);
    const empty = await make(s, developer.token, '/v1/trips', { name: 'no points' });
    const blank = await s.request('GET', `/v1/gps?device_id=both&trip_id=${empty.id}`, { token: reader.token });
    t.deepEqual([blank.status, blank.body.pagination.total, blank.body.data], [200, 0, []]);
  },
);

test.serial(
  `a trip with more than ${OFF_DEVICE_COUNTED} points off the device: the device's points are counted, exactly`,
  async (t) => {
    const s = stack();
    const { developer, reader } = await users();
    const trip = await make(s, developer.token, '/v1/trips', { name: 'two trackers' });
    await insertPoints('many', OFF_DEVICE_COUNTED + 50, trip.id);
    await insertPoints('few', 30, trip.id);
    for (const [device, limit, page] of [
      ['few', 7, 1],
      ['few', 7, 5],
      ['many', 100, 1],
      ['many', 100, 95],
      ['many', 100, 102],
    ] as const) {
      const label = `${device} limit ${limit} page ${page}`;
      const r = await s.request('GET', `/v1/gps?device_id=${device}&trip_id=${trip.id}&limit=${limit}&page=${page}`, {
        token: reader.token,
      });
      const want = await expectedBoth(device, trip.id, limit, (page - 1) * limit);
      t.is(r.status, 200, r.text);
      t.is(r.body.pagination.total, want.total, label);
      t.deepEqual(
        r.body.data.map((x: { id: string }) => x.id),
        want.ids,
        label,
      );
    }
  },
);

test.serial('the migration counts the points already stored, and the triggers keep counting after it', async (t) => {
  const s = stack();
  const { reader } = await users();
  const total = async (device: string) =>
    (await s.request('GET', `/v1/gps?device_id=${device}&limit=1`, { token: reader.token })).body.pagination.total;
  await insertPoints('before-a', 3);
  await s.db.transaction((trx) => down(trx));
  t.is(
    (await s.db('row_counters').where('counter', 'like', 'gps\\_points\\_by\\_device:%')).length,
    0,
    'down drops the counts',
  );
  // Points written while there was no counter.
  await insertPoints('before-a', 4);
  await insertPoints('before-b', 6);
  // As knex runs a migration: in one transaction.
  await s.db.transaction((trx) => up(trx));
  t.deepEqual([await total('before-a'), await total('before-b')], [7, 6]);
  await insertPoints('before-b', 2);
  await s.db.raw(`DELETE FROM gps_points WHERE id IN (SELECT id FROM gps_points WHERE device_id = 'before-a' LIMIT 5)`);
  t.deepEqual([await total('before-a'), await total('before-b')], [2, 8]);
  // TRUNCATE drops every device's count with the points.
  await s.db.raw('TRUNCATE gps_points');
  t.deepEqual([await total('before-a'), await total('before-b')], [0, 0]);
  t.is((await s.db('row_counters').where('counter', 'like', 'gps\\_points\\_by\\_device:%')).length, 0);
});

test.serial("a trip's points alone take their exact total from the trip's stored count, not a count", async (t) => {
  const s = stack();
  const { developer, reader } = await users();
  const trip = await make(s, developer.token, '/v1/trips', { name: 'trip totals' });
  await insertPoints('trip-a', 1300, trip.id);
  await insertPoints('trip-b', 400, trip.id);
  await insertPoints('trip-a', 90);
  const want = async (limit: number, offset: number) => {
    const { rows } = await s.db.raw(
      `SELECT id FROM gps_points WHERE trip_id = ? ORDER BY timestamp DESC, created_at DESC, id DESC LIMIT ? OFFSET ?`,
      [trip.id, limit, offset],
    );
    return rows.map((x: { id: string }) => x.id);
  };
  for (const [limit, page] of [
    [100, 1],
    [100, 9],
    [100, 17],
    [7, 200],
  ]) {
    const { result: r, statements } = await captured(() =>
      s.request('GET', `/v1/gps?trip_id=${trip.id}&limit=${limit}&page=${page}`, { token: reader.token }),
    );
    const label = `limit ${limit} page ${page}`;
    t.is(r.status, 200, r.text);
    t.is(r.body.pagination.total, 1700, label);
    t.deepEqual(
      r.body.data.map((x: { id: string }) => x.id),
      await want(limit, (page - 1) * limit),
      label,
    );
    t.false(
      statements.some((q) => /count\(\*\)/i.test(q.sql) && /\bgps_points\b/.test(q.sql)),
      `${label}: ${statements.map((q) => q.sql).join(' | ')}`,
    );
  }
  // The trip's stored count is what the page says.
  await s.db('trip_track_stats').where({ trip_id: trip.id }).increment('points', 50);
  try {
    const r = await s.request('GET', `/v1/gps?trip_id=${trip.id}&limit=5`, { token: reader.token });
    t.is(r.body.pagination.total, 1750);
  } finally {
    await s.db('trip_track_stats').where({ trip_id: trip.id }).decrement('points', 50);
  }
  const none = await s.request('GET', `/v1/gps?trip_id=00000000-0000-4000-8000-000000000000`, { token: reader.token });
  t.is(none.status, 200, none.text);
  t.is(none.body.pagination.total, 0);
  t.deepEqual(none.body.data, []);
});
