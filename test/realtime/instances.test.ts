import test from 'ava';
import { startRealtime } from '../../realtime/server';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { connect, publish, wsBase } from '../helpers/wsClient';
import { eventually } from '../helpers/wait';

/** Signed-in users here read tracking data: the default User role alone is self-service only. */
const READER = ['role_user', 'role_api_read_only'];

const stack = useStack(test, { realtime: 2 });

test.serial('a message published once reaches the subscribers of both instances, exactly once each', async (t) => {
  const s = stack();
  t.not(s.realtime[0].instanceId, s.realtime[1].instanceId);
  const user = await createUser(s.db, { roles: READER });
  const a = await connect(wsBase(s, 0), { token: user.token });
  const b = await connect(wsBase(s, 1), { token: user.token });
  const viaApi = await connect(wsBase(s), { token: user.token });
  for (const c of [a, b, viaApi]) await c.subscribe('gps');
  await publish(s, 'gps', { type: 'gpsUpdate', data: { id: 'p1' } });
  for (const c of [a, b, viaApi])
    t.deepEqual(await c.nextJson((m) => m.type === 'gpsUpdate'), { type: 'gpsUpdate', data: { id: 'p1' } });
  for (const c of [a, b, viaApi]) t.true(await c.nothing((f) => f.kind === 'json' && f.data.type === 'gpsUpdate', 200));
  // User pushes, too, reach the user's sockets on every instance.
  await publish(s, `user:${user.id}`, {
    type: 'emailChangeVerified',
    userId: user.id,
    email: 'x@example.test',
    timestamp: new Date().toISOString(),
  });
  for (const c of [a, b, viaApi])
    t.is((await c.nextJson((m) => m.type === 'emailChangeVerified')).email, 'x@example.test');
  for (const c of [a, b, viaApi]) c.close();
  await Promise.all([a.closed, b.closed, viaApi.closed]);
});

test.serial('/health sums connection and subscription counts over the instances', async (t) => {
  const s = stack();
  await eventually(() => s.realtime.every((r) => r.stats().connections === 0));
  const user = await createUser(s.db, { roles: READER });
  const a = await connect(wsBase(s, 0), { token: user.token }); // user:{id}
  const b = await connect(wsBase(s, 1)); // anonymous
  const c = await connect(wsBase(s, 1), { token: user.token }); // user:{id}
  await b.subscribe('public');
  await b.subscribe('vessels');
  await c.subscribe('gps');
  t.deepEqual(s.realtime[0].stats(), { connections: 1, subscriptions: 1, chatBots: 0 });
  t.deepEqual(s.realtime[1].stats(), { connections: 2, subscriptions: 4, chatBots: 0 });
  await eventually(async () => {
    const h = await s.request('GET', '/health');
    return h.body.services.websocket.connections === 3 && h.body.services.websocket.subscriptions === 5;
  });
  const h = await s.request('GET', '/health');
  t.deepEqual(h.body.services.websocket, { status: 'ok', connections: 3, subscriptions: 5 });
  t.is(h.body.status, 'ok');
  for (const x of [a, b, c]) x.close();
  await Promise.all([a.closed, b.closed, c.closed]);
  await eventually(async () => (await s.request('GET', '/health')).body.services.websocket.connections === 0);
  t.pass();
});

test.serial(
  "a dead instance's counts are forgotten: a new instance drops fields not refreshed for 10 minutes",
  async (t) => {
    const s = stack();
    const key = `${s.config.redisPrefix}ws:stats`;
    const live = s.realtime.map((r) => r.instanceId);
    // Killed instances never removed their fields: one 11 minutes old, one 9, one unreadable.
    await s.redis.hset(key, {
      'dead-11min': JSON.stringify({ clients: 3, at: Date.now() - 11 * 60_000 }),
      'quiet-9min': JSON.stringify({ clients: 1, at: Date.now() - 9 * 60_000 }),
      garbage: 'not json',
    });
    const third = await startRealtime(s.config, { port: 0 });
    try {
      const fields = await s.redis.hkeys(key);
      t.deepEqual(fields.sort(), [...live, third.instanceId, 'quiet-9min'].sort());
    } finally {
      await third.close();
      await s.redis.hdel(key, 'quiet-9min');
    }
    // A drained instance removes its own field.
    t.false((await s.redis.hkeys(key)).includes(third.instanceId));
  },
);
