import test from 'ava';
import { Model } from 'objection';
import WebSocket from 'ws';
import { startApi } from '../../api/server';
import { startRealtime } from '../../realtime/server';
import { freePort } from '../helpers/processes';
import { captureLog, LogLine } from '../helpers/logCapture';
import { useStack } from '../helpers/stack';
import { eventually } from '../helpers/wait';
import { refusedUpgrade } from '../helpers/wsClient';

/**
 * While the realtime process is down, the api refuses every WebSocket upgrade (503), and clients
 * reconnect at once (docs/websocket.md): the refusals are folded (shared/outageLog.ts) into one
 * line, and one "realtime process reachable again" line says when an upgrade is forwarded again.
 */

const stack = useStack(test);

test.serial('api: refused WebSocket upgrades while realtime is down log once, then its return', async (t) => {
  const s = stack();
  const realtimePort = await freePort();
  const lines: LogLine[] = [];
  const api = await startApi(
    { ...s.config, realtimePort },
    { port: 0, drainIdleGraceMs: 0, logger: captureLog(lines, 'api') },
  );
  Model.knex(s.db);
  let realtime: Awaited<ReturnType<typeof startRealtime>> | undefined;
  try {
    const base = `ws://127.0.0.1:${api.port}`;
    for (let i = 0; i < 20; i++) t.is((await refusedUpgrade(base)).status, 503);
    const refused = lines.filter((l) => l.msg === 'realtime process unreachable for /v1/ws');
    t.is(refused.length, 1, JSON.stringify(refused));
    realtime = await startRealtime(s.config, { port: realtimePort, logger: captureLog([], 'realtime') });
    Model.knex(s.db);
    const ws = new WebSocket(`${base}/v1/ws`);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    ws.close();
    const back = await eventually(() => lines.find((l) => l.msg === 'realtime process reachable again'));
    t.is(back.repeated, 19);
    t.true(back.outageMs >= 0);
  } finally {
    await api.close();
    await realtime?.close();
    Model.knex(s.db);
  }
});
