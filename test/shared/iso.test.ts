import test from 'ava';
import { iso, isoString } from '../../shared/presenters/iso';

test('isoString is toISOString for two million random instants between the years 900 and 10000', (t) => {
  const from = Date.UTC(900, 0, 1);
  const span = Date.UTC(10_001, 0, 1) - from;
  const wrong: string[] = [];
  for (let i = 0; i < 2_000_000; i++) {
    const d = new Date(from + Math.floor(Math.random() * span));
    if (isoString(d) !== d.toISOString()) wrong.push(d.toISOString());
  }
  t.deepEqual(wrong.slice(0, 5), []);
});

test('edges: leap days, century rules, the ends of the fast range, before 1970, far years', (t) => {
  const instants = [
    0,
    -1,
    Date.UTC(2000, 1, 29, 23, 59, 59, 999),
    Date.UTC(1900, 1, 28, 12),
    Date.UTC(2100, 2, 1) - 1,
    Date.UTC(1000, 0, 1),
    Date.UTC(1000, 0, 1) - 1,
    Date.UTC(9999, 11, 31, 23, 59, 59, 999),
    Date.UTC(9999, 11, 31, 23, 59, 59, 999) + 1,
    Date.UTC(-50, 5, 1),
    8.64e15,
  ];
  for (const ms of instants) t.is(isoString(new Date(ms)), new Date(ms).toISOString(), String(ms));
  t.throws(() => isoString(new Date(NaN)), { instanceOf: RangeError });
  t.is(iso(null), null);
  t.is(iso('2026-11-24T12:00:00+01:00'), '2026-11-24T11:00:00.000Z');
});
