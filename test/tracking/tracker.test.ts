import test from 'ava';
import Redis from 'ioredis';
import { SUBSCRIBER } from '../helpers/pushes';
import { trackerLinkFor, TRIP_START_TOLERANCE_MS } from '../../shared/caches/trackerLinks';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { countRows, gpsBody, make, once, setStatus } from '../helpers/tracking';
import { lockWaiters } from '../helpers/wait';

const stack = useStack(test, {
  env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_API_KEY: '100000', RATE_LIMIT_GPS_POST: '100000' },
});
const users = once(async () => {
  const s = stack();
  const [admin, owner, other] = await Promise.all([
    createUser(s.db, { roles: ['role_admin'] }),
    createUser(s.db, { roles: ['role_developer'] }),
    createUser(s.db, { roles: ['role_developer'] }),
  ]);
  return { admin, owner, other };
});
const trackerKey = async (userId: string) => createKey({ userId, scopes: ['gps:write', 'gps:read'], name: 'tracker' });

test('linking a key: only its owner (not a super admin); unknown key is 400; a key linked elsewhere moves', async (t) => {
  const s = stack();
  const { admin, owner, other } = await users();
  const key = await trackerKey(owner.id);
  const denied = await s.request('POST', '/v1/devices', {
    token: other.token,
    body: { name: 'not yours', api_key_id: key.id },
  });
  t.is(denied.status, 403);
  t.regex(denied.body.message, /^api_key_id: /);
  t.is(await countRows(s.db('devices').where('name', 'not yours')), 0);
  const unknown = await s.request('POST', '/v1/devices', {
    token: owner.token,
    body: { name: 'x', api_key_id: '00000000-0000-4000-8000-000000000000' },
  });
  t.is(unknown.status, 400);
  t.regex(unknown.body.message, /^api_key_id: no such API key/);
  t.regex(
    (await s.request('POST', '/v1/devices', { token: owner.token, body: { name: 'x', api_key_id: 'abc' } })).body
      .message,
    /^api_key_id: must be a UUID/,
  );

  const d1 = await make(s, owner.token, '/v1/devices', {
    name: 'Boat 1',
    device_type: 'gps-tracker',
    api_key_id: key.id,
  });
  t.is(d1.api_key_id, key.id);
  t.is(d1.is_active, true);
  // Not even a super admin links someone else's key (spec §4.3: the owner or a system key).
  const byAdmin = await s.request('POST', '/v1/devices', {
    token: admin.token,
    body: { name: 'admin', api_key_id: key.id },
  });
  t.is(byAdmin.status, 403, byAdmin.text);
  t.regex(byAdmin.body.message, /^api_key_id: only the key's owner or a system key/);
  t.is(await countRows(s.db('devices').where('name', 'admin')), 0);
  t.is((await s.request('GET', `/v1/devices/${d1.id}`, { token: owner.token })).body.data.api_key_id, key.id);
  // The owner links it to a second device: the key moves from d1 to d2.
  const d2 = await make(s, owner.token, '/v1/devices', { name: 'Boat 2', api_key_id: key.id });
  t.is(d2.api_key_id, key.id);
  t.is((await s.request('GET', `/v1/devices/${d1.id}`, { token: owner.token })).body.data.api_key_id, null);
  // PATCH links too, with the same rule.
  t.is(
    (await s.request('PATCH', `/v1/devices/${d1.id}`, { token: other.token, body: { api_key_id: key.id } })).status,
    403,
  );
  const back = await s.request('PATCH', `/v1/devices/${d1.id}`, { token: owner.token, body: { api_key_id: key.id } });
  t.is(back.status, 200);
  t.is(back.body.data.api_key_id, key.id);
  t.is((await s.request('GET', `/v1/devices/${d2.id}`, { token: owner.token })).body.data.api_key_id, null);
  // Anyone with devices:write may unlink.
  const unlinked = await s.request('PATCH', `/v1/devices/${d1.id}`, { token: other.token, body: { api_key_id: null } });
  t.is(unlinked.body.data.api_key_id, null);
  // Revoking the key (row deleted) unlinks the device by the foreign key.
  await s.request('PATCH', `/v1/devices/${d1.id}`, { token: owner.token, body: { api_key_id: key.id } });
  await s.db('api_keys').where('id', key.id).delete();
  t.is((await s.request('GET', `/v1/devices/${d1.id}`, { token: owner.token })).body.data.api_key_id, null);
});

test('a tracker key linked to a device posts points with that device and its active GPS-logging trip', async (t) => {
  const s = stack();
  const { owner } = await users();
  const key = await trackerKey(owner.id);
  const device = await make(s, owner.token, '/v1/devices', { name: 'Tracked', api_key_id: key.id });
  const trip = await make(s, owner.token, '/v1/trips', {
    name: 'logged',
    device_id: device.id,
    gps_logging_enabled: true,
  });
  const post = async (body: Record<string, unknown> = {}) => {
    const r = await s.request('POST', '/v1/gps', { token: key.key, body: gpsBody(body) });
    t.is(r.status, 201, r.text);
    return r.body.data as { device_id: string | null; trip_id: string | null };
  };
  // The key's device wins over a device_id in the body.
  t.like(await post({ device_id: 'spoofed' }), { device_id: device.id, trip_id: null });
  t.is((await setStatus(s, owner.token, trip.id, 'active')).status, 200);
  t.like(await post(), { device_id: device.id, trip_id: trip.id });
  await setStatus(s, owner.token, trip.id, 'paused');
  t.like(await post(), { device_id: device.id, trip_id: null });
  await setStatus(s, owner.token, trip.id, 'active');
  t.like(await post(), { device_id: device.id, trip_id: trip.id });
  // Batch ingest follows the same link.
  const batch = await s.request('POST', '/v1/gps/batch', {
    token: key.key,
    body: { points: [gpsBody(), gpsBody({ device_id: 'spoofed' })] },
  });
  const rows = await s.db('gps_points').whereIn(
    'id',
    batch.body.data.accepted.map((a: { id: string }) => a.id),
  );
  t.true(rows.every((r) => r.device_id === device.id && r.trip_id === trip.id));
  await setStatus(s, owner.token, trip.id, 'completed');
  t.like(await post(), { device_id: device.id, trip_id: null });

  // A trip without GPS logging on the same device does not collect points.
  const quiet = await make(s, owner.token, '/v1/trips', { name: 'quiet', device_id: device.id });
  await setStatus(s, owner.token, quiet.id, 'active');
  t.like(await post(), { trip_id: null });
  // Turning logging on for the running trip is seen at once.
  t.is(
    (await s.request('PATCH', `/v1/trips/${quiet.id}`, { token: owner.token, body: { gps_logging_enabled: true } }))
      .status,
    200,
  );
  t.like(await post(), { trip_id: quiet.id });

  // Moving the key to another device, then unlinking it.
  const other = await make(s, owner.token, '/v1/devices', { name: 'Other', api_key_id: key.id });
  t.like(await post(), { device_id: other.id, trip_id: null });
  await s.request('PATCH', `/v1/devices/${other.id}`, { token: owner.token, body: { api_key_id: null } });
  t.like(await post({ device_id: 'self-reported' }), { device_id: 'self-reported', trip_id: null });
  // Deleting a linked device drops the link as well.
  await s.request('PATCH', `/v1/devices/${device.id}`, { token: owner.token, body: { api_key_id: key.id } });
  t.like(await post(), { device_id: device.id });
  t.is((await s.request('DELETE', `/v1/devices/${device.id}`, { token: (await users()).admin.token })).status, 204);
  t.like(await post({ device_id: 'after-delete' }), { device_id: 'after-delete', trip_id: null });
});

test("a tracker's point dated before its trip started is stored on the device, not in the trip", async (t) => {
  const s = stack();
  const { owner } = await users();
  const key = await trackerKey(owner.id);
  const device = await make(s, owner.token, '/v1/devices', { name: 'Buffered', api_key_id: key.id });
  const trip = await make(s, owner.token, '/v1/trips', {
    name: 'late',
    device_id: device.id,
    gps_logging_enabled: true,
  });
  t.is((await setStatus(s, owner.token, trip.id, 'active')).status, 200);
  const started = Date.parse((await s.db('trips').where('id', trip.id).first()).started_at);
  const at = (ms: number) => Math.floor(ms / 1000);
  const post = async (timestamp: number) => {
    const r = await s.request('POST', '/v1/gps', { token: key.key, body: gpsBody({ timestamp }) });
    t.is(r.status, 201, r.text);
    return r.body.data as { device_id: string | null; trip_id: string | null };
  };
  // No fix yet (timestamp 0), and a position buffered ten minutes before the start: the device's.
  t.like(await post(0), { device_id: device.id, trip_id: null });
  t.like(await post(at(started - 600_000)), { device_id: device.id, trip_id: null });
  // Within the tolerance for clocks that disagree, and after the start: the trip's.
  t.like(await post(at(started - TRIP_START_TOLERANCE_MS / 2)), { device_id: device.id, trip_id: trip.id });
  t.like(await post(at(started + 5000)), { device_id: device.id, trip_id: trip.id });
  // The same through a batch of the tracker.
  const batch = await s.request('POST', '/v1/gps/batch', {
    token: key.key,
    body: { points: [gpsBody({ timestamp: 0 }), gpsBody({ timestamp: at(started + 6000) })] },
  });
  t.is(batch.status, 201, batch.text);
  const stored = await s.db('gps_points').where('device_id', device.id).orderBy('timestamp');
  t.deepEqual(
    stored.map((p) => p.trip_id),
    [null, null, null, trip.id, trip.id, trip.id],
  );
  // The trip's duration counts its own points only, not 57 years from 1970.
  const got = await s.request('GET', `/v1/trips/${trip.id}`, { token: owner.token });
  t.true(got.body.data.duration_seconds < 3600, JSON.stringify(got.body.data));
});

test('409 when activating a GPS-logging trip while another runs on the same device, by every path', async (t) => {
  const s = stack();
  const { owner } = await users();
  const device = await make(s, owner.token, '/v1/devices', { name: 'Conflicts' });
  const spare = await make(s, owner.token, '/v1/devices', { name: 'Spare' });
  const a = await make(s, owner.token, '/v1/trips', { name: 'A', device_id: device.id, gps_logging_enabled: true });
  const b = await make(s, owner.token, '/v1/trips', { name: 'B', device_id: device.id, gps_logging_enabled: true });
  const c = await make(s, owner.token, '/v1/trips', { name: 'C', device_id: device.id });
  t.is((await setStatus(s, owner.token, a.id, 'active')).status, 200);
  const conflict = await setStatus(s, owner.token, b.id, 'active');
  t.is(conflict.status, 409);
  t.is(conflict.body.error, 'Conflict');
  t.regex(conflict.body.message, /GPS logging/);
  t.is((await s.request('GET', `/v1/trips/${b.id}`, { token: owner.token })).body.data.status, 'draft');
  t.is((await s.request('GET', `/v1/trips/${b.id}/history`, { token: owner.token })).body.length, 0);
  // Without GPS logging there is no conflict.
  t.is((await setStatus(s, owner.token, c.id, 'active')).status, 200);
  t.is(
    (await s.request('PATCH', `/v1/trips/${c.id}`, { token: owner.token, body: { gps_logging_enabled: true } })).status,
    409,
  );
  // A paused trip does not block; resuming it then conflicts.
  t.is((await setStatus(s, owner.token, a.id, 'paused')).status, 200);
  t.is((await setStatus(s, owner.token, b.id, 'active')).status, 200);
  t.is((await setStatus(s, owner.token, a.id, 'active')).status, 409);
  // Moving a running logging trip onto the busy device conflicts too.
  const d = await make(s, owner.token, '/v1/trips', { name: 'D', device_id: spare.id, gps_logging_enabled: true });
  t.is((await setStatus(s, owner.token, d.id, 'active')).status, 200);
  t.is(
    (await s.request('PATCH', `/v1/trips/${d.id}`, { token: owner.token, body: { device_id: device.id } })).status,
    409,
  );
  // Trips without a device never conflict.
  const e = await make(s, owner.token, '/v1/trips', { name: 'E', gps_logging_enabled: true });
  const f = await make(s, owner.token, '/v1/trips', { name: 'F', gps_logging_enabled: true });
  t.is((await setStatus(s, owner.token, e.id, 'active')).status, 200);
  t.is((await setStatus(s, owner.token, f.id, 'active')).status, 200);
});

test('two concurrent activations on the same device: exactly one wins, the other gets 409', async (t) => {
  const s = stack();
  const { owner } = await users();
  for (let round = 0; round < 8; round++) {
    const device = await make(s, owner.token, '/v1/devices', { name: `race ${round}` });
    const [x, y] = await Promise.all([
      make(s, owner.token, '/v1/trips', { name: 'x', device_id: device.id, gps_logging_enabled: true }),
      make(s, owner.token, '/v1/trips', { name: 'y', device_id: device.id, gps_logging_enabled: true }),
    ]);
    const results = await Promise.all([
      setStatus(s, owner.token, x.id, 'active'),
      setStatus(s, owner.token, y.id, 'active'),
    ]);
    t.deepEqual(results.map((r) => r.status).sort(), [200, 409], JSON.stringify(results.map((r) => r.body)));
    const active = await s.db('trips').where({ device_id: device.id, status: 'active' });
    t.is(active.length, 1);
    t.is(await countRows(s.db('trip_status_history').whereIn('trip_id', [x.id, y.id])), 1);
  }
});

test('two concurrent activations of the same draft: one 200, one 400, a single history entry', async (t) => {
  const s = stack();
  const { owner } = await users();
  const trip = await make(s, owner.token, '/v1/trips', { name: 'twice' });
  const results = await Promise.all([
    setStatus(s, owner.token, trip.id, 'active'),
    setStatus(s, owner.token, trip.id, 'active'),
  ]);
  t.deepEqual(results.map((r) => r.status).sort(), [200, 400]);
  t.is((await s.request('GET', `/v1/trips/${trip.id}/history`, { token: owner.token })).body.length, 1);
});

test('each accepted point is published as gpsUpdate on ws:gps and ws:gps:<device_id> (Redis pub/sub)', async (t) => {
  const s = stack();
  const { owner } = await users();
  const sub = new Redis(s.config.redisUrl, SUBSCRIBER);
  try {
    const device = `pub-${Date.now()}`;
    const received: Array<{ channel: string; message: any }> = [];
    sub.on('message', (channel, raw) => received.push({ channel, message: JSON.parse(raw) }));
    const global = `${s.config.redisPrefix}ws:gps`;
    const perDevice = `${s.config.redisPrefix}ws:gps:${device}`;
    await sub.subscribe(global, perDevice);
    const r = await s.request('POST', '/v1/gps', {
      token: owner.token,
      body: gpsBody({ device_id: device, pdop: 1.5 }),
    });
    t.is(r.status, 201);
    const anon = await s.request('POST', '/v1/gps', { token: owner.token, body: gpsBody({ latitude: -33.9 }) });
    // Other tests in this file publish on ws:gps too: wait for these points, not for a message count.
    const arrived = (channel: string, ids: string[]) =>
      ids.every((id) => received.some((m) => m.channel === channel && m.message.data?.id === id));
    const waitFor = async (done: () => boolean) => {
      const deadline = Date.now() + 5000;
      while (!done() && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
    };
    await waitFor(() => arrived(global, [r.body.data.id, anon.body.data.id]) && arrived(perDevice, [r.body.data.id]));
    const onGlobal = received.filter((m) => m.channel === global).map((m) => m.message);
    const onDevice = received.filter((m) => m.channel === perDevice).map((m) => m.message);
    t.deepEqual(
      onGlobal.find((m) => m.data.id === r.body.data.id),
      { type: 'gpsUpdate', data: r.body.data },
    );
    t.deepEqual(onDevice, [{ type: 'gpsUpdate', data: r.body.data }]);
    const anonMsg = onGlobal.find((m) => m.data.id === anon.body.data.id);
    t.is(anonMsg.data.device_id, null);
    t.is(anonMsg.data.trip_id, null);
    t.false('channel' in anonMsg);
    t.deepEqual(
      Object.keys(anonMsg.data).sort(),
      [
        'altitude',
        'created_at',
        'device_id',
        'hdop',
        'heading',
        'id',
        'latitude',
        'longitude',
        'pdop',
        'speed_kmh',
        'speed_knots',
        'speed_mph',
        'speed_mps',
        'timestamp',
        'trip_id',
        'vdop',
      ].sort(),
    );

    // A batch publishes every accepted point.
    received.length = 0;
    const batch = await s.request('POST', '/v1/gps/batch', {
      token: owner.token,
      body: { points: [gpsBody({ device_id: device }), gpsBody({ latitude: 999 }), gpsBody({ device_id: device })] },
    });
    const ids = batch.body.data.accepted.map((a: { id: string }) => a.id).sort();
    t.is(ids.length, 2);
    await waitFor(() => arrived(perDevice, ids) && arrived(global, ids));
    t.deepEqual(
      received
        .filter((m) => m.channel === perDevice)
        .map((m) => m.message.data.id)
        .sort(),
      ids,
    );
  } finally {
    sub.disconnect();
  }
});

test('devices: CRUD, pagination (default 10), at-least-one PATCH, permissions', async (t) => {
  const s = stack();
  const { admin, owner } = await users();
  const reader = await createUser(s.db, { roles: ['role_api_read_only'] });
  const created = await s.request('POST', '/v1/devices', {
    token: owner.token,
    body: { name: 'Crud', description: 'd', device_type: 'ais' },
  });
  t.is(created.status, 201);
  t.deepEqual(Object.keys(created.body.data).sort(), [
    'api_key_id',
    'created_at',
    'description',
    'device_type',
    'id',
    'is_active',
    'name',
    'updated_at',
  ]);
  const id = created.body.data.id;
  const empty = await s.request('PATCH', `/v1/devices/${id}`, { token: owner.token, body: {} });
  t.is(empty.status, 400);
  t.regex(empty.body.message, /at least one of/);
  const patched = await s.request('PATCH', `/v1/devices/${id}`, { token: owner.token, body: { is_active: false } });
  t.like(patched.body.data, { is_active: false, name: 'Crud', description: 'd', device_type: 'ais' });
  t.is(
    (
      await s.request('POST', '/v1/devices', { token: owner.token, body: { description: 'no name' } })
    ).body.message.startsWith('name: '),
    true,
  );
  t.is((await s.request('POST', '/v1/devices', { token: reader.token, body: { name: 'x' } })).status, 403);
  t.is((await s.request('GET', `/v1/devices/${id}`, { token: reader.token })).status, 200);
  for (let i = 0; i < 11; i++)
    await make(s, owner.token, '/v1/devices', { name: `page ${String(i).padStart(2, '0')}` });
  const list = await s.request('GET', '/v1/devices', { token: reader.token });
  t.is(list.body.pagination.limit, 10);
  t.is(list.body.data.length, 10);
  const names = list.body.data.map((d: { name: string }) => d.name.toLowerCase());
  t.deepEqual(names, [...names].sort());
  t.is((await s.request('GET', '/v1/devices?limit=101', { token: reader.token })).status, 400);
  t.is((await s.request('DELETE', `/v1/devices/${id}`, { token: owner.token })).status, 403);
  t.is((await s.request('DELETE', `/v1/devices/${id}`, { token: admin.token })).status, 204);
  t.is((await s.request('GET', `/v1/devices/${id}`, { token: reader.token })).status, 404);
  t.is((await s.request('DELETE', `/v1/devices/${id}`, { token: admin.token })).status, 404);
  t.is((await s.request('PATCH', `/v1/devices/${id}`, { token: owner.token, body: { name: 'x' } })).status, 404);
});

test('a burst of first points from one tracker key looks its link up once', async (t) => {
  const s = stack();
  const { owner } = await users();
  const key = await trackerKey(owner.id);
  const device = await make(s, owner.token, '/v1/devices', { name: 'Burst boat', api_key_id: key.id });
  // The key's principal as the credential cache hands it out: one object until an invalidation.
  const resolved = await s.api.services.credentials.resolve(key.key);
  if (!resolved.ok) throw new Error(resolved.message);
  const lookups: string[] = [];
  // Only this key's lookups: the file's other tests post points with their own keys meanwhile.
  const listener = (q: { sql: string; bindings?: unknown[] }) => {
    if (/from "devices" as "d" left join "trips"/.test(q.sql) && q.bindings?.flat().includes(key.id))
      lookups.push(q.sql);
  };
  s.db.on('query', listener);
  try {
    const links = await Promise.all(Array.from({ length: 30 }, () => trackerLinkFor(s.db, resolved.principal)));
    t.true(links.every((l) => l?.deviceId === device.id));
  } finally {
    s.db.off('query', listener);
  }
  t.is(lookups.length, 1);
  // And through HTTP: a burst of points, each stored with the key's device.
  const answers = await Promise.all(
    Array.from({ length: 30 }, () => s.request('POST', '/v1/gps', { token: key.key, body: gpsBody() })),
  );
  t.deepEqual(
    answers.map((a) => a.status),
    answers.map(() => 201),
  );
  t.true(answers.every((a) => a.body.data.device_id === device.id));
});

test('two devices swapping their tracker keys at once: both answer, no deadlock, each key on one device', async (t) => {
  const s = stack();
  const { owner } = await users();
  const [k1, k2] = await Promise.all([trackerKey(owner.id), trackerKey(owner.id)]);
  const d1 = await make(s, owner.token, '/v1/devices', { name: 'swap 1', api_key_id: k1.id });
  const d2 = await make(s, owner.token, '/v1/devices', { name: 'swap 2', api_key_id: k2.id });
  const patch = (id: string, key: string) =>
    s.request('PATCH', `/v1/devices/${id}`, { token: owner.token, body: { api_key_id: key } });
  // Each request locked its own device, then waited for the other's: PostgreSQL broke the
  // deadlock by failing one of them (500) in most rounds.
  for (let round = 0; round < 12; round++) {
    const [a, b] = round % 2 ? [k1.id, k2.id] : [k2.id, k1.id];
    const [r1, r2] = await Promise.all([patch(d1.id, a), patch(d2.id, b)]);
    t.is(r1.status, 200, r1.text);
    t.is(r2.status, 200, r2.text);
    const rows = await s.db('devices').whereIn('id', [d1.id, d2.id]).select('id', 'api_key_id');
    const linked = rows.map((r: { api_key_id: string | null }) => r.api_key_id).filter(Boolean);
    t.is(new Set(linked).size, linked.length, `a key on two devices: ${JSON.stringify(rows)}`);
  }
});

test('a device sent back whole (its key unchanged) needs no right to the key; an unknown device is a 404 whatever the body', async (t) => {
  const s = stack();
  const { admin, owner } = await users();
  const key = await trackerKey(owner.id);
  const device = await make(s, owner.token, '/v1/devices', { name: 'whole', api_key_id: key.id });
  // The admin may edit the device, not link the owner's key: sending the key it already has is no link.
  const whole = await s.request('PATCH', `/v1/devices/${device.id}`, {
    token: admin.token,
    body: { name: 'whole, renamed', api_key_id: key.id },
  });
  t.is(whole.status, 200, whole.text);
  t.is(whole.body.data.api_key_id, key.id);
  for (const api_key_id of [key.id, '00000000-0000-4000-8000-000000000000']) {
    const unknown = await s.request('PATCH', '/v1/devices/00000000-0000-4000-8000-00000000d0d0', {
      token: admin.token,
      body: { name: 'x', api_key_id },
    });
    t.is(unknown.status, 404, unknown.text);
  }
});

test.serial(
  'a PATCH sending the key a device had, while another change moves it: saved as a checked change of key',
  async (t) => {
    const s = stack();
    const { owner } = await users();
    const [k1, k2] = await Promise.all([trackerKey(owner.id), trackerKey(owner.id)]);
    const device = await make(s, owner.token, '/v1/devices', { name: 'moving', api_key_id: k1.id });
    const other = await s.db.transaction();
    try {
      await other('devices').where('id', device.id).update({ api_key_id: k2.id });
      const patch = s.request('PATCH', `/v1/devices/${device.id}`, {
        token: owner.token,
        body: { name: 'moving, renamed', api_key_id: k1.id },
      });
      await lockWaiters(s.db, 1);
      await other.commit();
      const r = await patch;
      t.is(r.status, 200, r.text);
      t.is(r.body.data.api_key_id, k1.id);
    } finally {
      if (!other.isCompleted()) await other.rollback();
    }
  },
);
