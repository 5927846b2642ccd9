import test, { ExecutionContext } from 'ava';
import { down, up } from '../../migrations/20261219000000_geofence_event_counters';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { statementsWhile } from '../helpers/statements';
import { make, once } from '../helpers/tracking';

// GET /v1/geofences/{id}/events and GET /v1/devices/{id}/geofence-events take their exact totals
// from keyed row counters (migration 20261219000000_geofence_event_counters), not from a count of
// the fence's or device's events on every page, and read deep pages from the end.
const stack = useStack(test);

const setup = once(async () => {
  const s = stack();
  const [developer, reader] = await Promise.all([
    createUser(s.db, { roles: ['role_developer'] }),
    createUser(s.db, { roles: ['role_api_read_only'] }),
  ]);
  const fence = (name: string) =>
    make(s, developer.token, '/v1/geofences', { name, latitude: 52.5, longitude: 13.4, radius_km: 1 });
  const [a, b] = [await fence('totals a'), await fence('totals b')];
  const devices = [
    await make(s, developer.token, '/v1/devices', { name: 'events a' }),
    await make(s, developer.token, '/v1/devices', { name: 'events b' }),
  ];
  return { developer, reader, fences: [a.id as string, b.id as string], devices: devices.map((d) => d.id as string) };
});

/** Inserts `n` events of `fence` and `device`, with many equal occurred_at values (ties broken by id). */
async function insertEvents(fence: string, device: string | null, n: number): Promise<void> {
  await stack().db.raw(
    `INSERT INTO geofence_events (geofence_id, device_id, event, distance_km, latitude, longitude, occurred_at)
     SELECT ?, ?, CASE WHEN g % 2 = 0 THEN 'enter' ELSE 'exit' END, 0, 52.5, 13.4,
            timestamptz '2026-01-01' + (g / 3) * interval '1 second'
       FROM generate_series(1, ?::int) g`,
    [fence, device, n],
  );
}

/** The events counted, and one page read forward with OFFSET, in SQL. */
async function expected(column: 'geofence_id' | 'device_id', key: string, limit: number, offset: number) {
  const db = stack().db;
  const { rows } = await db.raw(`SELECT count(*)::int AS n FROM geofence_events WHERE ${column} = ?`, [key]);
  const page = await db.raw(
    `SELECT id FROM geofence_events WHERE ${column} = ? ORDER BY occurred_at DESC, id DESC LIMIT ? OFFSET ?`,
    [key, limit, offset],
  );
  return { total: rows[0].n as number, ids: page.rows.map((r: { id: string }) => r.id) };
}

/** The statements (with bindings) the api sends while `fn` runs. */
const captured = <T>(fn: () => Promise<T>) => statementsWhile(stack().db, fn);

/** Every page asked for equals the forward OFFSET read, its total the count, and nothing counts the events. */
async function checkPages(t: ExecutionContext, when: string, fences: string[]) {
  const s = stack();
  const { reader, devices } = await setup();
  const cases = [
    ...fences.map((id) => ({
      column: 'geofence_id' as const,
      key: id,
      path: `/v1/geofences/${id}/events`,
      counter: 'geofence_events_by_fence',
    })),
    ...devices.map((id) => ({
      column: 'device_id' as const,
      key: id,
      path: `/v1/devices/${id}/geofence-events`,
      counter: 'geofence_events_by_device',
    })),
  ];
  for (const c of cases) {
    const { total } = await expected(c.column, c.key, 1, 0);
    for (const [limit, page] of [
      [20, 1],
      [100, 3],
      // Deep, before the middle (offset 1,100 of fence a's 4,600 or so): keys first, then rows.
      [100, 12],
      [100, Math.max(1, Math.ceil(total / 100))],
      [7, Math.max(1, Math.ceil(total / 7) - 2)],
      [100, Math.ceil(total / 100) + 1],
    ]) {
      const label = `${when}: ${c.path} limit ${limit} page ${page}`;
      const { result: r, statements } = await captured(() =>
        s.request('GET', `${c.path}?limit=${limit}&page=${page}`, { token: reader.token }),
      );
      const want = await expected(c.column, c.key, limit, (page - 1) * limit);
      t.is(r.status, 200, r.text);
      t.deepEqual(
        r.body.data.map((e: { id: string }) => e.id),
        want.ids,
        label,
      );
      t.is(r.body.pagination.total, want.total, label);
      const events = statements.filter((q) => /\bgeofence_events\b/.test(q.sql));
      t.false(
        events.some((q) => /count\(\*\)/i.test(q.sql)),
        `${label}: ${events.map((q) => q.sql).join(' | ')}`,
      );
      t.true(
        events.some((q) => /\brow_counters\b/.test(q.sql) && q.sql.includes(`'${c.counter}:'`)),
        `${label}: the counter is read`,
      );
    }
  }
}

test.serial("a fence's and a device's totals are exact after every kind of write", async (t) => {
  const { fences, devices } = await setup();
  const [a, b] = fences as [string, string];
  const [d1, d2] = devices as [string, string];
  await insertEvents(a, d1, 4200);
  await insertEvents(a, d2, 450);
  await insertEvents(b, d1, 300);
  await insertEvents(a, null, 40);
  await checkPages(t, 'inserted', fences);

  // Deleted events, events moved to another device and fence, a fence deleted with its history.
  const db = stack().db;
  await db.raw(
    'DELETE FROM geofence_events WHERE id IN (SELECT id FROM geofence_events WHERE device_id = ? LIMIT 33)',
    [d1],
  );
  await db.raw(
    'UPDATE geofence_events SET device_id = ?, geofence_id = ? WHERE id IN (SELECT id FROM geofence_events WHERE device_id = ? AND geofence_id = ? LIMIT 21)',
    [d2, b, d1, a],
  );
  await checkPages(t, 'deleted and moved', fences);
  // A fence deleted takes its history with it (ON DELETE CASCADE): the devices' totals follow.
  await db('geofences').where('id', b).delete();
  await checkPages(t, 'a fence deleted', [a]);
});

test.serial('the migration counts the events that were there before it', async (t) => {
  const { fences, devices } = await setup();
  const db = stack().db;
  await db.transaction((trx) => down(trx));
  await insertEvents(fences[0]!, devices[1]!, 77);
  await db.transaction((trx) => up(trx));
  await checkPages(t, 'counted by the migration', [fences[0]!]);
});
