import { HttpError } from './errors';

/**
 * Deepest nesting of arrays and objects a body may have. Free-form JSON fields (a geofence's
 * metadata, a setting's value) are stored, cloned and serialised recursively: a body nested a few
 * thousand levels deep, well within the size limit, overflowed the stack there (a 500). No field of
 * the API needs more than a few levels; 64 leaves room for any real metadata.
 */
export const MAX_JSON_DEPTH = 64;

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
