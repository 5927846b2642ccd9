import { HttpError } from './errors';

/**
 * Deepest nesting of arrays and objects a body may have. Free-form JSON fields (a geofence's
 * metadata, a setting's value) are stored, cloned and serialised recursively: a body nested a few
 * thousand levels deep, well within the size limit, overflowed the stack there (a 500). No field of
 * the API needs more than a few levels; 64 leaves room for any real metadata.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * Most values a JSON text may hold, counted in its text before it is parsed (`jsonValuesOver`).
 * Parsing costs per value, not per byte: 3.6 MB of 60,000 arrays nested 30 deep (within the size
 * and depth limits) held the event loop ~1.2 s, anonymously. The largest bodies routes take hold far
 * fewer: a GPS batch of 1,000 points with every field 15,001, a setting's value of 64 KiB at most 43,691 (two
 * of every three bytes `[],`). At this limit a body parses in tens of milliseconds.
 */
export const MAX_JSON_VALUES = 50_000;

/**
 * Whether JSON text holds more than `max` values, counted as its `[`, `{` and `,` outside strings
 * (every array and object, and every item after the first of each). One pass that stops at the
 * limit, jumping over strings with indexOf; text that is not JSON is counted as far as it goes and
 * left to the parser to refuse.
 */
export function jsonValuesOver(text: string, max = MAX_JSON_VALUES): boolean {
  let count = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // To the closing quote: the next one not escaped, i.e. after an even run of backslashes.
      for (;;) {
        i = text.indexOf('"', i + 1);
        if (i < 0) return false;
        let b = i - 1;
        while (text.charCodeAt(b) === 0x5c) b--;
        if ((i - 1 - b) % 2 === 0) break;
      }
    } else if ((c === 0x5b || c === 0x7b || c === 0x2c) && ++count > max) return true;
  }
  return false;
}

/** What is wrong with a parsed body, and where (a path such as `metadata.a.0`, cut after a few segments). */
interface BodyProblem {
  path: string[];
  kind: 'depth' | 'number';
}

/**
 * The first value nested deeper than `MAX_JSON_DEPTH`, or the first number JSON.parse could only
 * read as ±Infinity (`1e400`: stored as null by a jsonb column, so a free-form field would change
 * silently), or undefined. Recursion stops at the depth limit, so the check itself cannot overflow.
 */
function firstProblem(value: unknown, depth: number, path: string[], numbers = true): BodyProblem | undefined {
  if (value === null || typeof value !== 'object') {
    return numbers && typeof value === 'number' && !Number.isFinite(value) ? { path, kind: 'number' } : undefined;
  }
  if (depth >= MAX_JSON_DEPTH) return { path, kind: 'depth' };
  const at = (key: string) => (path.length < 4 ? [...path, key] : path);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v = value[i] as unknown;
      if (typeof v === 'number') {
        if (numbers && !Number.isFinite(v)) return { path: at(String(i)), kind: 'number' };
      } else if (v !== null && typeof v === 'object') {
        const found = firstProblem(v, depth + 1, at(String(i)), numbers);
        if (found) return found;
      }
    }
    return undefined;
  }
  for (const key in value) {
    const v = (value as Record<string, unknown>)[key];
    if (typeof v === 'number') {
      if (numbers && !Number.isFinite(v)) return { path: at(key), kind: 'number' };
    } else if (v !== null && typeof v === 'object') {
      const found = firstProblem(v, depth + 1, at(key), numbers);
      if (found) return found;
    }
  }
  return undefined;
}

/**
 * Refuses (400, naming the field) a parsed JSON value nested deeper than `MAX_JSON_DEPTH`, or
 * holding a number too large for a double unless `numbers` is false. The body rule of every
 * request (api/middleware/body.ts), and of JSON that arrives as text elsewhere (GraphQL variables,
 * a protobuf request's metadata_json).
 */
export function checkJsonLimits(value: unknown, numbers = true): void {
  const problem = firstProblem(value, 0, [], numbers);
  if (!problem) return;
  const field = problem.path.length ? problem.path.join('.') : 'body';
  const message =
    problem.kind === 'depth'
      ? `nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`
      : 'number too large (beyond ±1.8e308)';
  // The shape of every other validation 400: the message names the field, details lists it.
  throw new HttpError(400, 'BadRequest', `${field}: ${message}`, { details: [{ field, message }] });
}
