import pg from 'pg';

/** pg's own timestamptz parser (postgres-date), taken before anything replaces it. */
const parsePostgresDate = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text') as (
  s: string,
) => Date | number | null;

/**
 * Parses PostgreSQL's text output of a `timestamptz` ("2026-11-24 11:34:55.123456+00") into a Date.
 *
 * pg's default parser (postgres-date) runs four regular expressions per value, and a list page
 * has dozens of timestamps; in the api's CPU profile it was one of the largest single entries. This
 * reads the fixed-position ISO form PostgreSQL writes with DateStyle ISO by char codes and hands
 * everything else (BC years, years before 1000, infinity, other DateStyles) to postgres-date, so
 * the result is the same Date in every case: milliseconds truncated, the offset applied.
 */
export function parseTimestamptz(s: string): Date | number | null {
  const fast = parseIsoTimestamptz(s);
  return fast ?? parsePostgresDate(s);
}

/** Two ASCII digits at `i` as a number, or -1. */
function two(s: string, i: number): number {
  const a = s.charCodeAt(i) - 48;
  const b = s.charCodeAt(i + 1) - 48;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : -1;
}

/** The fast path; null when `s` is not in the plain form (the caller falls back). */
function parseIsoTimestamptz(s: string): Date | null {
  const n = s.length;
  if (
    n < 22 ||
    s.charCodeAt(4) !== 45 || // -
    s.charCodeAt(7) !== 45 ||
    s.charCodeAt(10) !== 32 || // space
    s.charCodeAt(13) !== 58 || // :
    s.charCodeAt(16) !== 58
  )
    return null;
  const y1 = two(s, 0);
  const y2 = two(s, 2);
  const month = two(s, 5);
  const day = two(s, 8);
  const hour = two(s, 11);
  const minute = two(s, 14);
  const second = two(s, 17);
  // Years below 1000 (two-digit years mean 19xx to Date.UTC) go the general way.
  if (y1 < 10 || y2 < 0 || month < 1 || day < 1 || hour < 0 || minute < 0 || second < 0) return null;
  let i = 19;
  let ms = 0;
  if (s.charCodeAt(i) === 46) {
    // Fraction: the first three digits are the milliseconds; the rest would be truncated away.
    i++;
    let scale = 100;
    for (;;) {
      const d = s.charCodeAt(i) - 48;
      if (!(d >= 0 && d <= 9)) break;
      ms += d * scale;
      scale = scale === 1 ? 0 : scale / 10;
      i++;
    }
  }
  const sign = s.charCodeAt(i);
  if (sign !== 43 && sign !== 45) return null; // + or -
  const oh = two(s, i + 1);
  if (oh < 0) return null;
  i += 3;
  let om = 0;
  let os = 0;
  if (i < n) {
    if (s.charCodeAt(i) !== 58) return null;
    om = two(s, i + 1);
    if (om < 0) return null;
    i += 3;
    if (i < n) {
      if (s.charCodeAt(i) !== 58) return null;
      os = two(s, i + 1);
      if (os < 0) return null;
      i += 3;
    }
  }
  if (i !== n) return null;
  const offsetMs = (sign === 45 ? -1 : 1) * (oh * 3600 + om * 60 + os) * 1000;
  return new Date(Date.UTC(y1 * 100 + y2, month - 1, day, hour, minute, second, ms) - offsetMs);
}
