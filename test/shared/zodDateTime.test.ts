import test from 'ava';
import { isIsoDateTime, LAST_INSTANT_MESSAGE, z, zDateTime } from '../../shared/zod';

// isIsoDateTime is zod's `.datetime({ offset: true })` pattern made once: it must accept exactly
// what zod's check accepts, and zDateTime must answer as before.
const zods = z.string().datetime({ offset: true });

function* candidates(): Generator<string> {
  const dates = ['2026-01-01', '2024-02-29', '2026-02-29', '2026-13-01', '0000-01-01', '9999-12-31', '2026-1-01'];
  const times = [
    '00:00',
    '23:59',
    '24:00',
    '12:60',
    '00:00:00',
    '23:59:59',
    '23:59:60',
    '00:00:00.1',
    '00:00:00.123456789',
    '00:00:00.',
  ];
  const zones = ['', 'Z', 'z', '+01:00', '-0530', '+25:00', '+1', '+01:00Z'];
  for (const d of dates) {
    yield d;
    for (const sep of ['T', 't', ' '])
      for (const time of times) for (const zone of zones) yield `${d}${sep}${time}${zone}`;
  }
  yield '';
  yield 'now';
}

test('isIsoDateTime accepts exactly what zod’s datetime({ offset: true }) accepts', (t) => {
  let accepted = 0;
  let tried = 0;
  for (const v of candidates()) {
    tried++;
    const want = zods.safeParse(v).success;
    t.is(isIsoDateTime(v), want, v);
    if (want) accepted++;
  }
  t.true(accepted > 50 && accepted < tried - 50, `${accepted} of ${tried} accepted: both kinds were tried`);
});

test('zDateTime: format, real instant and last instant, one message each', (t) => {
  const field = zDateTime();
  t.true(field.safeParse('2026-06-01T12:00:00+02:00').success);
  const issues = (v: string) => {
    const r = field.safeParse(v);
    return r.success ? [] : r.error.issues.map((i) => i.message);
  };
  t.deepEqual(issues('2026-06-01'), ['must be an ISO 8601 date-time']);
  t.deepEqual(issues('2026-02-30T00:00:00Z'), ['must be an ISO 8601 date-time']);
  t.deepEqual(issues('9999-12-31T23:59:00-12:00'), [LAST_INSTANT_MESSAGE]);
});
