import test from 'ava';
import { statementName } from '../../shared/preparedStatements';
import { createUser } from '../helpers/factories';
import { explainJson, vacuumSettled } from '../helpers/statements';
import { useStack } from '../helpers/stack';

// A page past the middle of a counted list is read from its end (api/pagination.ts, DEEP_OFFSET):
// the same rows, in the same order, as reading forward, with an OFFSET counted from the end.
const stack = useStack(test);

test('deep pages read from the end give exactly the rows of the forward order', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  // 2,550 points with many equal timestamps and creation times (ties broken by id), and 1,530 devices
  // whose names tie case-insensitively (ties broken by name, then id).
  await s.db.raw(`
    INSERT INTO gps_points (latitude, longitude, timestamp, speed_kmh, speed_mps, speed_mph, speed_knots, device_id, created_at)
    SELECT 1, 1, timestamp '2026-01-01' + (g / 7) * interval '1 second', 0, 0, 0, 0, 'deep-' || (g % 3),
           timestamp '2026-01-02' + (g % 5) * interval '1 second'
    FROM generate_series(1, 2550) g`);
  await s.db.raw(
    `INSERT INTO devices (name) SELECT CASE WHEN g % 2 = 0 THEN 'Dev-' ELSE 'dev-' END || (g % 400) FROM generate_series(1, 1530) g`,
  );

  const statements: string[] = [];
  s.db.on('query', (q: { sql: string }) => statements.push(q.sql));
  // Each list with the last term of its order reversed, as it appears in the statement read from the end.
  const cases: Array<[string, string, string, (limit: number, offset: number) => Promise<string[]>]> = [
    [
      '/v1/gps',
      'gps_points',
      '"id" ASC',
      async (limit, offset) =>
        (
          await s.db.raw(
            'SELECT id FROM gps_points ORDER BY timestamp DESC, created_at DESC, id DESC LIMIT ? OFFSET ?',
            [limit, offset],
          )
        ).rows.map((r: { id: string }) => r.id),
    ],
    [
      '/v1/devices',
      'devices',
      'id DESC',
      async (limit, offset) =>
        (
          await s.db.raw('SELECT id FROM devices ORDER BY lower(name), name, id LIMIT ? OFFSET ?', [limit, offset])
        ).rows.map((r: { id: string }) => r.id),
    ],
  ];
  for (const [path, table, reversedTerm, forward] of cases) {
    const total = Number((await s.db(table).count({ n: '*' }))[0].n);
    for (const [limit, page] of [
      [100, 11],
      [100, 14],
      [100, Math.ceil(total / 100)],
      [7, 200],
      [7, Math.ceil(total / 7)],
      [100, 1],
    ]) {
      statements.length = 0;
      const r = await s.request('GET', `${path}?limit=${limit}&page=${page}`, { token: admin.token });
      t.is(r.status, 200, r.text);
      t.deepEqual(
        r.body.data.map((x: { id: string }) => x.id),
        await forward(limit, (page - 1) * limit),
        `${path} limit ${limit} page ${page}`,
      );
      t.is(r.body.pagination.total, total);
      // Past the middle, the rows were read in the reversed order; before it, forward.
      const offset = (page - 1) * limit;
      const reversed = statements.some((q) => q.includes(`from "${table}"`) && q.includes(reversedTerm));
      t.is(
        reversed,
        offset >= 1000 && offset > total - offset - limit,
        `${path} page ${page}: ${statements.join(' | ')}`,
      );
    }
    const past = await s.request('GET', `${path}?limit=100&page=${Math.ceil(total / 100) + 1}`, { token: admin.token });
    t.deepEqual(past.body.data, []);
    t.is(past.body.pagination.total, total);
  }
});

test.serial(
  'a deep page reads its keys off an index and only its own rows from the table (deferred join), planned for its offset',
  async (t) => {
    const s = stack();
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    // A device of its own: its keyed counter is its total, so pages before the middle read forward.
    await s.db.raw(`
    INSERT INTO gps_points (latitude, longitude, timestamp, speed_kmh, speed_mps, speed_mph, speed_knots, device_id, created_at)
    SELECT 1, 1, timestamp '2026-02-01' + (g / 3) * interval '1 second', 0, 0, 0, 0, 'deferred',
           timestamp '2026-02-02' + (g % 4) * interval '1 second'
    FROM generate_series(1, 6000) g`);
    // The visibility map set, as autovacuum leaves a table: keys can be read from the index alone.
    await vacuumSettled(s.db, 'gps_points');
    const forward = async (limit: number, offset: number) =>
      (
        await s.db.raw(
          `SELECT id FROM gps_points WHERE device_id = 'deferred'
          ORDER BY timestamp DESC, created_at DESC, id DESC LIMIT ? OFFSET ?`,
          [limit, offset],
        )
      ).rows.map((r: { id: string }) => r.id);
    for (const [limit, page, fromEnd] of [
      [100, 21, false],
      [100, 30, false],
      [100, 45, true],
      [7, 300, false],
    ] as const) {
      const offset = (page - 1) * limit;
      const label = `limit ${limit} page ${page}`;
      const seen: Array<{ sql: string; bindings: unknown[] }> = [];
      const listener = (q: { sql: string; bindings: unknown[] }) => {
        if (/"gps_points"/.test(q.sql) && !/__page_total$/.test(q.sql)) seen.push(q);
      };
      s.db.on('query', listener);
      let r;
      try {
        r = await s.request('GET', `/v1/gps?device_id=deferred&limit=${limit}&page=${page}`, { token: admin.token });
      } finally {
        s.db.off('query', listener);
      }
      t.is(r.status, 200, r.text);
      t.deepEqual(
        r.body.data.map((x: { id: string }) => x.id),
        await forward(limit, offset),
        label,
      );
      t.is(r.body.pagination.total, 6000, label);
      // The page's statement (the total is read in it, or alone first for a page read from the end).
      const paged = seen.filter((q) => /\blimit\b/i.test(q.sql));
      t.is(paged.length, 1, `${label}: ${seen.map((q) => q.sql).join(' | ')}`);
      const plan = JSON.parse(await explainJson(s.db, paged[0], { analyze: true })) as Array<{
        Plan: Record<string, unknown>;
      }>;
      const walk = (n: Record<string, unknown>): Array<Record<string, unknown>> => [
        n,
        ...((n.Plans as Array<Record<string, unknown>> | undefined) ?? []).flatMap(walk),
      ];
      const onPoints = walk(plan[0].Plan).filter((n) => n['Relation Name'] === 'gps_points');
      // The rows fetched from the table: the page's own, not the ones OFFSET skips.
      const fetched = onPoints
        .filter((n) => n['Node Type'] !== 'Index Only Scan')
        .reduce((sum, n) => sum + Number(n['Actual Rows']) * Number(n['Actual Loops']), 0);
      t.is(fetched, limit, `${label}: ${onPoints.map((n) => `${String(n['Node Type'])} ${String(n['Actual Rows'])}`)}`);
      const skipped = fromEnd ? 6000 - offset - limit : offset;
      t.true(
        onPoints.some((n) => n['Node Type'] === 'Index Only Scan' && Number(n['Actual Rows']) === skipped + limit),
        label,
      );
      // Planned for its values: sent unnamed, never as a generic plan.
      t.is(statementName(paged[0].sql), undefined, label);
    }
  },
);
