import test from 'ava';
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
