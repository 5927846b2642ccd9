import test from 'ava';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { connect, publish, WsConn, wsBase } from '../helpers/wsClient';

/** Signed-in users here read tracking data: the default User role alone is self-service only. */
const READER = ['role_user', 'role_api_read_only'];

// A generous message budget: one test subscribes to 200 channels in a burst.
const stack = useStack(test, { realtime: 1, env: { WS_MAX_MESSAGES_PER_10S: '1000' } });

const ALLOWED = (ch: string) => ({ type: 'message', channel: ch, data: `Subscribed to ${ch}` });
const DENIED = (ch: string) => ({ type: 'error', message: `access denied to channel ${ch}` });

/** Subscribes to each channel and returns channel → reply. */
async function tryAll(conn: WsConn, channels: string[]): Promise<Record<string, any>> {
  const out: Record<string, any> = {};
  for (const ch of channels) out[ch] = await conn.subscribe(ch);
  return out;
}

async function grantRole(db: any, roleId: string, permissions: string[]): Promise<void> {
  await db('roles').insert({ id: roleId, name: roleId, description: 'test', is_system: false });
  for (const p of permissions) {
    const [resource, action] = p.split(':');
    const perm = await db('permissions').where({ resource, action }).first('id');
    await db('role_permissions').insert({ role_id: roleId, permission_id: perm.id });
  }
}

test('anonymous: only public, public:* and vessels', async (t) => {
  const s = stack();
  const other = await createUser(s.db, { roles: READER });
  const conn = await connect(wsBase(s, 0));
  const r = await tryAll(conn, [
    'public',
    'public:news',
    'vessels',
    'gps',
    'gps:dev-1',
    'geofence',
    'geofence:g1',
    'admin:ops',
    `user:${other.id}`,
    'bots:chat',
  ]);
  t.deepEqual(r.public, ALLOWED('public'));
  t.deepEqual(r['public:news'], ALLOWED('public:news'));
  t.deepEqual(r.vessels, ALLOWED('vessels'));
  for (const ch of ['gps', 'gps:dev-1', 'geofence', 'geofence:g1', 'admin:ops', `user:${other.id}`])
    t.deepEqual(r[ch], DENIED(ch), ch);
  t.deepEqual(r['bots:chat'], { type: 'error', message: 'unknown channel bots:chat' });
  conn.close();
});

test('user reading tracking data: own user channel (auto), gps*, geofence*, public*, vessels; not admin or other users', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const other = await createUser(s.db, { roles: READER });
  const conn = await connect(wsBase(s, 0), { token: user.token });
  // Auto-subscribed: a push on the user channel arrives without subscribing.
  await publish(s, `user:${user.id}`, {
    type: 'emailChangeVerified',
    userId: user.id,
    email: 'new@example.test',
    timestamp: '2026-01-01T00:00:00.000Z',
  });
  t.deepEqual(await conn.nextJson(), {
    type: 'emailChangeVerified',
    userId: user.id,
    email: 'new@example.test',
    timestamp: '2026-01-01T00:00:00.000Z',
  });
  const r = await tryAll(conn, [
    `user:${user.id}`,
    `user:${other.id}`,
    'admin:ops',
    'gps',
    'gps:dev-1',
    'geofence',
    'geofence:g1',
    'public',
    'public:x',
    'vessels',
  ]);
  t.deepEqual(r[`user:${user.id}`], ALLOWED(`user:${user.id}`));
  t.deepEqual(r[`user:${other.id}`], DENIED(`user:${other.id}`));
  t.deepEqual(r['admin:ops'], DENIED('admin:ops'));
  for (const ch of ['gps', 'gps:dev-1', 'geofence', 'geofence:g1', 'public', 'public:x', 'vessels'])
    t.deepEqual(r[ch], ALLOWED(ch), ch);
  t.deepEqual(await conn.subscribe('nonsense'), { type: 'error', message: 'unknown channel nonsense' });
  t.deepEqual(await conn.subscribe('bots:chat'), { type: 'error', message: 'unknown channel bots:chat' });
  t.deepEqual(await conn.subscribe('bad channel!'), { type: 'error', message: 'invalid channel name: bad channel!' });
  conn.close();
});

test('user without gps:read / geofences:read is refused gps* and geofence*', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: [] });
  const conn = await connect(wsBase(s, 0), { token: user.token });
  const r = await tryAll(conn, ['gps', 'gps:x', 'geofence', 'geofence:x', 'public']);
  for (const ch of ['gps', 'gps:x', 'geofence', 'geofence:x']) t.deepEqual(r[ch], DENIED(ch), ch);
  t.deepEqual(r.public, ALLOWED('public'));
  conn.close();
});

test('admin:* needs admin:read (or super admin); even an admin cannot read another user channel', async (t) => {
  const s = stack();
  await grantRole(s.db, 'role_watcher', ['admin:read']);
  const watcher = await createUser(s.db, { roles: ['role_watcher'] });
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const other = await createUser(s.db, { roles: READER });
  const w = await connect(wsBase(s, 0), { token: watcher.token });
  t.deepEqual(await w.subscribe('admin:audit'), ALLOWED('admin:audit'));
  t.deepEqual(await w.subscribe('gps'), DENIED('gps'));
  w.close();
  const a = await connect(wsBase(s, 0), { token: admin.token });
  const r = await tryAll(a, ['admin:audit', 'admin:users', 'gps', 'geofence', `user:${other.id}`]);
  for (const ch of ['admin:audit', 'admin:users', 'gps', 'geofence']) t.deepEqual(r[ch], ALLOWED(ch), ch);
  t.deepEqual(r[`user:${other.id}`], DENIED(`user:${other.id}`));
  a.close();
});

test('API keys: channels by their scopes, never a user channel (not even the owner), no auto-subscription', async (t) => {
  const s = stack();
  const owner = await createUser(s.db, { roles: READER });
  const gpsKey = await createKey({ userId: owner.id, scopes: ['gps:read'] });
  const conn = await connect(wsBase(s, 0), { token: gpsKey.key });
  const r = await tryAll(conn, ['gps', 'gps:dev', 'geofence', 'admin:x', `user:${owner.id}`, 'public', 'vessels']);
  for (const ch of ['gps', 'gps:dev', 'public', 'vessels']) t.deepEqual(r[ch], ALLOWED(ch), ch);
  for (const ch of ['geofence', 'admin:x', `user:${owner.id}`]) t.deepEqual(r[ch], DENIED(ch), ch);
  await publish(s, `user:${owner.id}`, {
    type: 'forceLogout',
    userId: owner.id,
    reason: 'x',
    timestamp: new Date().toISOString(),
  });
  t.true(await conn.nothing((f) => f.kind === 'json' && f.data.type === 'forceLogout'));
  conn.close();

  const geoKey = await createKey({ userId: owner.id, scopes: ['geofences:read'] });
  const g = await connect(wsBase(s, 0), { token: geoKey.key });
  t.deepEqual(await g.subscribe('geofence:g1'), ALLOWED('geofence:g1'));
  t.deepEqual(await g.subscribe('gps'), DENIED('gps'));
  g.close();

  const sys = await connect(wsBase(s, 0), { token: s.systemKey });
  const rs = await tryAll(sys, ['admin:ops', 'gps', 'geofence', `user:${owner.id}`]);
  for (const ch of ['admin:ops', 'gps', 'geofence']) t.deepEqual(rs[ch], ALLOWED(ch), ch);
  t.deepEqual(rs[`user:${owner.id}`], DENIED(`user:${owner.id}`));
  sys.close();
});

test('pushes reach exactly the subscribers of their channel, as the published JSON text; unsubscribe stops them', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const gpsConn = await connect(wsBase(s, 0), { token: user.token });
  const vesselsConn = await connect(wsBase(s, 0));
  await gpsConn.subscribe('gps');
  await vesselsConn.subscribe('vessels');
  const point = {
    id: 'p1',
    device_id: null,
    trip_id: null,
    latitude: 52.5,
    longitude: 13.4,
    altitude: null,
    heading: null,
    timestamp: '2026-01-01T00:00:00.000Z',
    speed_kmh: 0,
    speed_mps: 0,
    speed_mph: 0,
    speed_knots: 0,
    pdop: null,
    hdop: null,
    vdop: null,
    created_at: '2026-01-01T00:00:00.000Z',
  };
  await publish(s, 'gps', { type: 'gpsUpdate', data: point });
  const f = await gpsConn.next((x) => x.kind === 'json' && x.data.type === 'gpsUpdate');
  t.is(f.kind, 'json');
  t.is((f as any).raw, JSON.stringify({ type: 'gpsUpdate', data: point }));
  t.false('channel' in (f as any).data);
  t.true(await vesselsConn.nothing((x) => x.kind === 'json' && x.data.type === 'gpsUpdate'));

  await publish(s, 'vessels', { type: 'vesselsUpdate', data: { vessels: [] } });
  t.deepEqual(await vesselsConn.nextJson((m) => m.type === 'vesselsUpdate'), {
    type: 'vesselsUpdate',
    data: { vessels: [] },
  });

  gpsConn.json({ type: 'unsubscribe', channel: 'gps' });
  t.deepEqual(await gpsConn.nextJson((m) => m.type === 'message'), {
    type: 'message',
    channel: 'gps',
    data: 'Unsubscribed from gps',
  });
  await publish(s, 'gps', { type: 'gpsUpdate', data: point });
  t.true(await gpsConn.nothing((x) => x.kind === 'json' && x.data.type === 'gpsUpdate'));
  gpsConn.close();
  vesselsConn.close();
});

test('JSON protocol errors: invalid JSON, unknown type, missing channel; JSON ping → pong', async (t) => {
  const s = stack();
  const conn = await connect(wsBase(s, 0));
  conn.ws.send('not json');
  t.deepEqual(await conn.nextJson(), { type: 'error', message: 'invalid JSON message' });
  conn.json({ type: 'dance' });
  t.deepEqual(await conn.nextJson(), { type: 'error', message: 'unknown message type dance' });
  conn.json({ type: 'subscribe' });
  t.deepEqual(await conn.nextJson(), { type: 'error', message: 'channel: required string' });
  conn.json({ type: 'ping' });
  t.deepEqual(await conn.nextJson(), { type: 'pong' });
  conn.close();
});

test('unsubscribe refuses a name no channel has exactly as subscribe does, echoing only its start', async (t) => {
  const s = stack();
  const conn = await connect(wsBase(s, 0));
  const names = ['\u0000x', '\ud800', '\u202Eevil\r\n', 'bad channel!', '\u202E'.repeat(20_000)];
  for (const channel of names) {
    const subscribed = await conn.subscribe(channel);
    t.is(subscribed.type, 'error');
    conn.json({ type: 'unsubscribe', channel });
    const f = await conn.next((x) => x.kind === 'json');
    t.deepEqual((f as { data: unknown }).data, subscribed, JSON.stringify(channel.slice(0, 20)));
    t.regex(subscribed.message, /^invalid channel name: /);
    t.true(f.raw.length < 1300, `${f.raw.length} bytes`); // 200 characters at most, each escaped at worst
  }
  // A name a channel can have is still confirmed, held or not.
  conn.json({ type: 'unsubscribe', channel: 'public:nothing-held' });
  t.deepEqual(await conn.nextJson(), {
    type: 'message',
    channel: 'public:nothing-held',
    data: 'Unsubscribed from public:nothing-held',
  });
  conn.close();
});

test('a connection holds at most 200 channels', async (t) => {
  const s = stack();
  const conn = await connect(wsBase(s, 0));
  for (let i = 0; i < 200; i++) conn.json({ type: 'subscribe', channel: `public:c${i}` });
  for (let i = 0; i < 200; i++) await conn.nextJson((m) => m.channel === `public:c${i}`);
  t.deepEqual(await conn.subscribe('public:one-more'), {
    type: 'error',
    message: 'too many subscriptions (at most 200)',
  });
  // Re-subscribing to a held channel is still confirmed.
  t.deepEqual(await conn.subscribe('public:c7'), ALLOWED('public:c7'));
  conn.close();
});
