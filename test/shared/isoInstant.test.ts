import test from 'ava';
import { botGuild, botMember } from '../../shared/domain/chatSync';
import { calendarDayExists, parseIsoInstant, zDateTime } from '../../shared/zod';

/** Runs `fn` with the process in another time zone (Node reads TZ again when it changes). */
function inZone<T>(zone: string, fn: () => T): T {
  const before = process.env.TZ;
  process.env.TZ = zone;
  try {
    return fn();
  } finally {
    if (before === undefined) delete process.env.TZ;
    else process.env.TZ = before;
  }
}

test('parseIsoInstant: no offset is UTC in every process time zone; offsets apply', (t) => {
  for (const zone of ['UTC', 'Asia/Kolkata', 'America/New_York', 'Pacific/Chatham']) {
    inZone(zone, () => {
      t.is(parseIsoInstant('2026-03-29T02:30:00')?.toISOString(), '2026-03-29T02:30:00.000Z', zone);
      t.is(parseIsoInstant('2026-03-29T02:30')?.toISOString(), '2026-03-29T02:30:00.000Z', zone);
      t.is(parseIsoInstant('2026-03-29T08:00:00+05:30')?.toISOString(), '2026-03-29T02:30:00.000Z', zone);
      t.is(parseIsoInstant('2026-03-28T21:30:00.5-0500')?.toISOString(), '2026-03-29T02:30:00.500Z', zone);
    });
  }
});

test('parseIsoInstant: days that do not exist, other spellings and years past 9999 are no instant', (t) => {
  for (const v of [
    '2026-02-30T00:00:00Z',
    '2026-02-29T00:00:00Z',
    'March 1 2026',
    '1',
    '2026',
    '2026-03-01',
    '2026-03-01 10:00:00Z',
    '9999-12-31T23:59:59-12:00',
  ])
    t.is(parseIsoInstant(v), null, v);
  t.is(parseIsoInstant('2028-02-29T00:00:00Z')?.toISOString(), '2028-02-29T00:00:00.000Z');
  t.is(parseIsoInstant('9999-12-31T23:59:59.999Z')?.toISOString(), '9999-12-31T23:59:59.999Z');
});

test('chat bot timestamps are read the same in every process time zone; bad ones name the field', (t) => {
  const member = { userId: '500000000000000001', username: 'offsetless', joinedAt: '2026-03-29T02:30:00' };
  for (const zone of ['UTC', 'Asia/Kolkata', 'America/New_York']) {
    inZone(zone, () => {
      const r = botMember.safeParse(member);
      t.true(r.success, zone);
      t.is(r.success && r.data.joinedAt, '2026-03-29T02:30:00.000Z', zone);
    });
  }
  const feb30 = botMember.safeParse({ ...member, joinedAt: '2026-02-30T00:00:00Z' });
  t.false(feb30.success);
  t.deepEqual(!feb30.success && feb30.error.issues.map((i) => [i.path.join('.'), i.message]), [
    ['joinedAt', 'must be an ISO 8601 timestamp'],
  ]);
  const guild = botGuild.safeParse({ guildId: '111111111111111111', name: 'g', botJoinedAt: 'March 1 2026' });
  t.false(guild.success);
  t.deepEqual(!guild.success && guild.error.issues.map((i) => i.path.join('.')), ['botJoinedAt']);
});

test('zDateTime refuses an instant past 9999-12-31T23:59:59.999Z, which would print as +010000-…', (t) => {
  const r = zDateTime().safeParse('9999-12-31T23:59:59-12:00');
  t.false(r.success);
  t.deepEqual(!r.success && r.error.issues.map((i) => i.message), ['must not be later than 9999-12-31T23:59:59.999Z']);
  // One problem per field: a text that is no date-time is only that.
  const expanded = zDateTime().safeParse('+010000-01-01T00:00:00.000Z');
  t.deepEqual(!expanded.success && expanded.error.issues.map((i) => i.message), ['must be an ISO 8601 date-time']);
  t.true(zDateTime().safeParse('9999-12-31T23:59:59.999Z').success);
  t.true(zDateTime().safeParse('9999-12-31T23:59:59+14:00').success);
});

test('calendarDayExists counts days as Date does: every month and day of leap, common and century years', (t) => {
  /** The Date-based answer calendarDayExists replaced: parse the day, print it back, compare. */
  const byDate = (v: string) => {
    const day = new Date(`${v.slice(0, 10)}T00:00:00Z`);
    return !Number.isNaN(day.getTime()) && day.toISOString().startsWith(v.slice(0, 10));
  };
  const pad = (n: number, width: number) => String(n).padStart(width, '0');
  let checked = 0;
  for (const year of [0, 1, 4, 100, 400, 1600, 1700, 1900, 1996, 2000, 2023, 2024, 2100, 2400, 9999]) {
    for (let month = 0; month <= 13; month++) {
      for (let day = 0; day <= 32; day++) {
        const v = `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}T12:00:00Z`;
        t.is(calendarDayExists(v), byDate(v), v);
        checked++;
      }
    }
  }
  t.is(checked, 15 * 14 * 33);
  for (const v of ['2024-02-29', '2000-02-29', '0000-02-29']) t.true(calendarDayExists(v), v);
  for (const v of ['2023-02-29', '1900-02-29', '2100-02-29', '2026-04-31', '2026-1-01', '2026/01/01', '20x6-01-01', ''])
    t.false(calendarDayExists(v), v);
});
