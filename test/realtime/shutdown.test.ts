import test from 'ava';
import { freePort, spawnService } from '../helpers/processes';
import { useStack } from '../helpers/stack';
import { connect } from '../helpers/wsClient';
import { orAfter } from '../helpers/wait';

const stack = useStack(test);

test('SIGTERM: every WebSocket client gets close code 1012 (service restart) and the process exits promptly', async (t) => {
  const s = stack();
  const port = await freePort();
  const rt = await spawnService('realtime', { ...s.env, REALTIME_PORT: String(port) }, 'realtime listening');
  try {
    const clients = await Promise.all([0, 1, 2].map(() => connect(`ws://127.0.0.1:${port}`)));
    const termAt = Date.now();
    rt.child.kill('SIGTERM');
    const closes = await Promise.all(clients.map((c) => c.closed));
    // 1012 tells clients to reconnect (to another instance, or this one once restarted).
    t.deepEqual(
      closes,
      clients.map(() => ({ code: 1012, reason: 'service restart' })),
    );
    const exit = await orAfter(rt.exited, 10_000, null);
    t.is(exit?.code, 0);
    t.true(exit !== null && exit.at - termAt < 5000, `exit ${exit && exit.at - termAt} ms after SIGTERM`);
  } finally {
    await rt.kill();
  }
});
