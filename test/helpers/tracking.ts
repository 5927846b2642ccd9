import type { Stack } from './stack';
import { createUser } from './factories';

/** Unix seconds, whole. */
export const nowSeconds = () => Math.floor(Date.now() / 1000);

/** A valid POST /v1/gps body; override any field. */
export function gpsBody(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    latitude: 52.52,
    longitude: 13.405,
    altitude: 34,
    heading: 90,
    timestamp: nowSeconds(),
    speed_kmh: 36,
    speed_mps: 10,
    speed_mph: 22.37,
    speed_knots: 19.44,
    ...over,
  };
}

/** Creates a resource and returns its `data`, failing loudly on anything but 201. */
export async function make<T = any>(s: Stack, token: string, path: string, body: unknown): Promise<T> {
  const r = await s.request('POST', path, { token, body });
  if (r.status !== 201) throw new Error(`POST ${path} → ${r.status}: ${r.text}`);
  return r.body.data as T;
}

/** Patches a trip's status and returns the response. */
export function setStatus(
  s: Stack,
  token: string,
  tripId: string,
  status: string,
  extra: Record<string, unknown> = {},
) {
  return s.request('PATCH', `/v1/trips/${tripId}`, { token, body: { status, ...extra } });
}

/** Memoises an async setup, so tests can share users created after the stack's before hook. */
export function once<T>(fn: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | undefined;
  return () => (p ??= fn());
}

/** Number of rows a knex query matches. */
export async function countRows(q: {
  count(arg: Record<string, string>): PromiseLike<Array<Record<string, unknown>>>;
}): Promise<number> {
  const [row] = await q.count({ n: '*' });
  return Number(row.n);
}

/** An admin and a developer, created once per file on first use (after the stack has started). */
export function adminAndDeveloper(stack: () => Stack) {
  return once(async () => {
    const s = stack();
    const [admin, developer] = await Promise.all([
      createUser(s.db, { roles: ['role_admin'] }),
      createUser(s.db, { roles: ['role_developer'] }),
    ]);
    return { admin, developer };
  });
}

/** A gps_points row as the database takes it directly (an operator's SQL, retention, imports). */
export function pointRow(tripId: string | null, at: { latitude: number; longitude: number; timestamp: number }) {
  return {
    trip_id: tripId,
    latitude: at.latitude,
    longitude: at.longitude,
    timestamp: new Date(at.timestamp * 1000),
    speed_kmh: 1,
    speed_mps: 1,
    speed_mph: 1,
    speed_knots: 1,
  };
}
