import test from 'ava';
import type { Knex } from 'knex';
import { createRequire } from 'node:module';
import pg from 'pg';
import { loadConfig } from '../../shared/config';
import { createDb } from '../../shared/db';
import { parseTimestamptz } from '../../shared/pgDates';
import { createTestDatabase } from '../helpers/db';

// postgres-date, pg's own parser, is what the fast path must agree with in every case.
const pgTypesRequire = createRequire(require.resolve('pg-types'));
const reference = pgTypesRequire('postgres-date') as (s: string) => Date | number | null;

let db: Knex;
let drop: () => Promise<void>;

test.before(async () => {
  const made = await createTestDatabase();
  drop = made.drop;
  db = createDb(loadConfig({ DATABASE_URL: made.url }), { poolMax: 1, bindModels: false });
});

test.after.always(async () => {
  await db?.destroy();
  await drop?.();
});

const same = (a: Date | number | null, b: Date | number | null) =>
  a instanceof Date && b instanceof Date ? Object.is(a.getTime(), b.getTime()) : Object.is(a, b);

test('the timestamptz parser is installed for pg and gives the reference Date', async (t) => {
  t.is(pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text'), parseTimestamptz);
  const { rows } = await db.raw(`SELECT '2026-11-24 11:34:55.123456+00'::timestamptz AS at`);
  t.true(rows[0].at instanceof Date);
  t.is(rows[0].at.toISOString(), '2026-11-24T11:34:55.123Z');
});

test('PostgreSQL output in many time zones and precisions parses exactly as pg parsed it', async (t) => {
  const zones = ['UTC', 'Europe/Berlin', 'Asia/Kolkata', 'America/St_Johns', 'Pacific/Chatham', 'Africa/Monrovia'];
  let checked = 0;
  await db.transaction(async (trx) => {
    for (const zone of zones) {
      await trx.raw(`SET LOCAL TimeZone = '${zone}'`);
      // Dates from 1000 to 9999 and the special values, with 0 to 6 fractional digits.
      const { rows } = await trx.raw(`
        SELECT (ts)::text AS text FROM (
          SELECT date_trunc('microseconds', timestamptz '1000-01-01 00:00:00+00'
                   + (random() * (timestamptz '9999-12-31+00' - timestamptz '1000-01-01+00'))) AS ts
            FROM generate_series(1, 300)
          UNION ALL SELECT date_trunc('second', now()) UNION ALL SELECT date_trunc('milliseconds', now())
          UNION ALL SELECT now() UNION ALL SELECT timestamptz '1883-11-18 12:00:00+00'
          UNION ALL SELECT timestamptz '0099-06-01 00:00:00+00' UNION ALL SELECT timestamptz '0044-03-15 BC'
          UNION ALL SELECT timestamptz 'infinity' UNION ALL SELECT timestamptz '-infinity'
        ) v`);
      for (const { text } of rows as Array<{ text: string }>) {
        t.true(same(parseTimestamptz(text), reference(text)), `${zone}: ${text}`);
        checked++;
      }
    }
  });
  t.is(checked, zones.length * 308);
});

test('hand-made edge cases agree with the reference, and nothing it cannot read is guessed', (t) => {
  const cases = [
    '2026-11-24 11:34:55+00',
    '2026-11-24 11:34:55.9+00',
    '2026-11-24 11:34:55.999999+00',
    '2026-11-24 11:34:55.000001-03:30',
    '1892-05-01 00:00:00+00:53:28',
    '2026-02-29 00:00:00+00',
    '2026-11-24 11:34:55',
    '2026-11-24',
    '2026-11-24T11:34:55Z',
    '12026-11-24 11:34:55+00',
    '2026-11-24 11:34:55+0x',
    'garbage that is long enough',
  ];
  for (const c of cases) t.true(same(parseTimestamptz(c), reference(c)), c);
});

test('a Date parameter reaches PostgreSQL as the same instant whatever the process time zone', async (t) => {
  const before = process.env.TZ;
  // Kolkata's local mean time was +05:53:28: pg's local-time text cut the offset to whole minutes.
  process.env.TZ = 'Asia/Kolkata';
  try {
    for (const iso of ['1850-06-01T00:00:00.000Z', '2026-03-29T02:30:00.123Z']) {
      const { rows } = await db.raw<{ rows: Array<{ s: string }> }>(
        'SELECT to_char(?::timestamptz AT TIME ZONE \'UTC\', \'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"\') AS s',
        [new Date(iso)],
      );
      t.is(rows[0].s, iso);
    }
  } finally {
    if (before === undefined) delete process.env.TZ;
    else process.env.TZ = before;
  }
});
