import test from 'ava';
import { useStack } from '../helpers/stack';
import { connect, wsBase } from '../helpers/wsClient';

// Short heartbeat so the test runs in a second; production uses 5 s / 10 s (spec §6, §8).
const stack = useStack(test, { realtime: 1, env: { WS_HEARTBEAT_INTERVAL_MS: '100', WS_HEARTBEAT_TIMEOUT_MS: '400' } });

test('the server sends protocol pings and drops a client that stops answering them', async (t) => {
  const s = stack();
  const silent = await connect(wsBase(s, 0), { autoPong: false });
  const healthy = await connect(wsBase(s, 0));
  let pings = 0;
  silent.ws.on('ping', () => pings++);
  // JSON pings do not count as heartbeat answers.
  const keepTalking = setInterval(() => silent.ws.readyState === silent.ws.OPEN && silent.json({ type: 'ping' }), 50);
  const started = Date.now();
  const closed = await silent.closed;
  clearInterval(keepTalking);
  const after = Date.now() - started;
  t.true(pings >= 2, `pings: ${pings}`);
  // Terminated (no close handshake with an unresponsive peer), roughly at the timeout.
  t.is(closed.code, 1006);
  t.true(after >= 300 && after < 2000, `closed after ${after} ms`);
  // The client that answers pings stays connected well past the timeout.
  await new Promise((r) => setTimeout(r, 800));
  t.is(healthy.ws.readyState, healthy.ws.OPEN);
  healthy.json({ type: 'ping' });
  t.deepEqual(await healthy.nextJson((m) => m.type === 'pong'), { type: 'pong' });
  healthy.close();
});
