import test from 'ava';
import { useStack } from '../helpers/stack';
import { connect, publish, wsBase } from '../helpers/wsClient';
import { eventually } from '../helpers/wait';

// Tiny send buffer and message budget, so slow consumers and chatty clients are easy to produce.
const stack = useStack(test, { realtime: 1, env: { WS_MAX_BUFFERED_BYTES: '1024', WS_MAX_MESSAGES_PER_10S: '20' } });

test('a client that stops reading is disconnected with 1013 while a fast client receives everything', async (t) => {
  const s = stack();
  const slow = await connect(wsBase(s, 0));
  const fast = await connect(wsBase(s, 0));
  await slow.subscribe('public:bulk');
  await fast.subscribe('public:bulk');
  const before = s.realtime[0].stats().subscriptions;
  (slow.ws as any)._socket.pause();

  let received = 0;
  fast.ws.on('message', () => received++);
  const big = 'x'.repeat(64 * 1024);
  const total = 200;
  for (let i = 0; i < total; i++)
    await publish(s, 'public:bulk', { type: 'message', channel: 'public:bulk', data: `${i}:${big}` });

  // The server gave up on the slow client (out of every channel at once) …
  await eventually(() => s.realtime[0].stats().subscriptions === before - 1, 10_000);
  // … while the fast one got every message.
  await eventually(() => received === total, 10_000);
  t.is(fast.ws.readyState, fast.ws.OPEN);
  // Once it reads again, the slow client finds the close frame behind what was already queued.
  (slow.ws as any)._socket.resume();
  t.is((await slow.closed).code, 1013);
  fast.close();
});

test('more than WS_MAX_MESSAGES_PER_10S messages close the connection with 1008', async (t) => {
  const s = stack();
  const conn = await connect(wsBase(s, 0));
  for (let i = 0; i < 25; i++) conn.json({ type: 'ping' });
  const closed = await conn.closed;
  t.is(closed.code, 1008);
  t.is(closed.reason, 'too many messages');
  t.is(conn.frames.filter((f) => f.kind === 'json' && f.data.type === 'pong').length, 20);

  // A client within the budget is unaffected.
  const calm = await connect(wsBase(s, 0));
  for (let i = 0; i < 10; i++) calm.json({ type: 'ping' });
  for (let i = 0; i < 10; i++) await calm.nextJson((m) => m.type === 'pong');
  t.is(calm.ws.readyState, calm.ws.OPEN);
  calm.close();
});
