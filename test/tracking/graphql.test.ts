import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody, make, nowSeconds } from '../helpers/tracking';

const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' } });
const MUTATION =
  'mutation($deviceId: String, $before: String) { deleteGpsData(deviceId: $deviceId, before: $before) { deleted keptOnTrips } }';

test('deleteGpsData deletes a device’s points (optionally before a time), keeps trip points, needs gps:delete', async (t) => {
  const s = stack();
  const [admin, developer] = await Promise.all([
    createUser(s.db, { roles: ['role_admin'] }),
    createUser(s.db, { roles: ['role_developer'] }),
  ]);
  const trip = await make(s, developer.token, '/v1/trips', { name: 'kept' });
  const t0 = nowSeconds() - 1000;
  await s.request('POST', '/v1/gps/batch', {
    token: developer.token,
    body: {
      points: [
        gpsBody({ device_id: 'wipe', timestamp: t0 }),
        gpsBody({ device_id: 'wipe', timestamp: t0 + 500 }),
        gpsBody({ device_id: 'wipe', timestamp: t0, trip_id: trip.id }),
        gpsBody({ device_id: 'keep', timestamp: t0 }),
      ],
    },
  });
  // Warm the cache for the device, so the deletion must drop it.
  t.is((await s.request('GET', '/v1/gps/current?device_id=wipe', { token: developer.token })).status, 200);

  const denied = await s.request('POST', '/v1/gql', {
    token: developer.token,
    body: { query: MUTATION, variables: { deviceId: 'wipe' } },
  });
  t.is(denied.body.errors[0].extensions.status, 403);
  const noFilter = await s.request('POST', '/v1/gql', { token: admin.token, body: { query: MUTATION, variables: {} } });
  t.is(noFilter.body.errors[0].extensions.status, 400);
  const badDate = await s.request('POST', '/v1/gql', {
    token: admin.token,
    body: { query: MUTATION, variables: { before: 'yesterday' } },
  });
  t.regex(badDate.body.errors[0].message, /^before: /);
  // An empty device identifier is a bad filter, never "every device"; a day that does not exist
  // (which Date would roll over to 2 March) and hour 24 are bad dates. Nothing is deleted by any.
  for (const variables of [
    { deviceId: '' },
    { deviceId: '  ', before: new Date().toISOString() },
    { before: '2027-02-30T00:00:00Z' },
    { deviceId: 'wipe', before: '2026-01-01T24:00:00Z' },
    // An offset no clock has: it reached the database as an invalid date (a 400 naming no field).
    { deviceId: 'wipe', before: '2026-01-01T00:00:00+25:00' },
  ]) {
    const r = await s.request('POST', '/v1/gql', { token: admin.token, body: { query: MUTATION, variables } });
    t.is(r.body.errors?.[0]?.extensions?.status, 400, JSON.stringify(variables));
    t.regex(r.body.errors[0].message, /^(deviceId|before): /, JSON.stringify(variables));
  }
  t.is((await s.request('GET', '/v1/gps/current?device_id=keep', { token: developer.token })).status, 200);
  const trips = await s.request('POST', '/v1/gql', {
    token: admin.token,
    body: { query: '{ trips(status: "") { total } }' },
  });
  t.is(trips.body.errors?.[0]?.extensions?.status, 400, trips.text);

  const older = await s.request('POST', '/v1/gql', {
    token: admin.token,
    body: { query: MUTATION, variables: { deviceId: 'wipe', before: new Date((t0 + 100) * 1000).toISOString() } },
  });
  t.deepEqual(older.body.data.deleteGpsData, { deleted: 1, keptOnTrips: 1 });
  const all = await s.request('POST', '/v1/gql', {
    token: admin.token,
    body: { query: MUTATION, variables: { deviceId: 'wipe' } },
  });
  t.deepEqual(all.body.data.deleteGpsData, { deleted: 1, keptOnTrips: 1 });
  const current = await s.request('GET', '/v1/gps/current?device_id=wipe', { token: developer.token });
  t.is(current.body.data.trip_id, trip.id);
  t.is((await s.request('GET', '/v1/gps/current?device_id=keep', { token: developer.token })).status, 200);
  // The system key reaches /v1/gql but runs only the operations that name it (spec §5.5): not this one.
  const sys = await s.request('POST', '/v1/gql', {
    token: s.systemKey,
    body: { query: MUTATION, variables: { deviceId: 'keep' } },
  });
  t.deepEqual(sys.body.data, { deleteGpsData: null });
  t.is(sys.body.errors[0].extensions.status, 403);
  t.is((await s.request('GET', '/v1/gps/current?device_id=keep', { token: developer.token })).status, 200);
});

test('deleteGpsData by date alone forgets the cached current position of every device it emptied', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const old = nowSeconds() - 3 * 86400;
  const devices = ['aged-a', 'aged-b'];
  const posted = await s.request('POST', '/v1/gps/batch', {
    token: admin.token,
    body: { points: devices.map((device_id) => gpsBody({ device_id, timestamp: old })) },
  });
  t.is(posted.status, 201, posted.text);
  // Warm the cache of each device: the delete below names none of them.
  for (const d of devices)
    t.is((await s.request('GET', `/v1/gps/current?device_id=${d}`, { token: admin.token })).status, 200);
  const wiped = await s.request('POST', '/v1/gql', {
    token: admin.token,
    body: { query: MUTATION, variables: { before: new Date((old + 60) * 1000).toISOString() } },
  });
  t.is(wiped.body.data.deleteGpsData.keptOnTrips, 0, wiped.text);
  t.true(wiped.body.data.deleteGpsData.deleted >= devices.length);
  for (const d of devices) {
    const current = await s.request('GET', `/v1/gps/current?device_id=${d}`, { token: admin.token });
    t.is(current.status, 404, `${d}: ${current.text}`);
  }
});
