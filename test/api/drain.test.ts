import test from 'ava';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { describeOutcome, loadKey, Outcome, send, startLoad } from '../helpers/httpLoad';
import { ServiceProcess, spawnService } from '../helpers/processes';
import { Stack, useStack } from '../helpers/stack';
import { connect } from '../helpers/wsClient';
import { gpsBody } from '../helpers/tracking';
import { sleep } from '../helpers/wait';

// The api runs as a child process (`node dist/api/server.js`, as PM2 runs it) on this stack's
// database and Redis prefix; SIGTERM is what PM2 (SIGINT) and systemd send to stop or reload it.
const stack = useStack(test, { realtime: 1, env: { RATE_LIMIT_GPS_POST: '1000000', RATE_LIMIT_API_KEY: '1000000' } });

/** Bound on SIGTERM → exit with idle keep-alive sockets open: far below PM2's kill_timeout. */
const EXIT_BOUND_MS = 5000;

async function startApiProcess(
  s: Stack,
  env: Record<string, string> = {},
): Promise<{ api: ServiceProcess; port: number }> {
  const api = await spawnService('api', { ...s.env, ...env }, 'api listening');
  return { api, port: (await api.waitForLog('api listening')).port };
}

test.serial(
  'SIGTERM under keep-alive load: nothing reset, drain answers say Connection: close, prompt exit, stored POSTs = the 201s',
  async (t) => {
    const s = stack();
    const key = await loadKey(s.db);
    const { api, port } = await startApiProcess(s);
    const prefix = `drain-${randomBytes(4).toString('hex')}-`;
    try {
      // Idle keep-alive sockets, opened and then left alone: they must not keep the process alive.
      const idleAgent = new http.Agent({ keepAlive: true });
      const idle = await Promise.all([0, 1, 2].map(() => send(idleAgent, port, key, 'GET', '/v1/gps?limit=1')));
      t.deepEqual(
        idle.map((o) => o.status),
        [200, 200, 200],
      );

      // Steady load: every loop sends its next request as soon as the previous one is answered.
      const load = startLoad(port, key, { loops: 6, prefix });
      const { outcomes } = load;
      await sleep(1500);
      const termAt = Date.now();
      const answeredBefore = outcomes.length;
      api.child.kill('SIGTERM');
      const exit = await Promise.race([api.exited, sleep(12_000).then(() => null)]);
      await load.stop();

      const count = (f: (o: Outcome) => boolean) => outcomes.filter(f).length;
      t.log(
        `${outcomes.length} requests: ${answeredBefore} answered before SIGTERM, ${count((o) => o.sentAt >= termAt && !!o.status)} answered after,`,
        `${count((o) => o.error === 'ECONNREFUSED')} refused, ${count((o) => !!o.error && o.error !== 'ECONNREFUSED')} reset or cut;`,
        `exit ${exit ? `${exit.at - termAt} ms after SIGTERM` : 'none within 12 s'}`,
      );
      t.true(answeredBefore > 10, `only ${answeredBefore} requests answered before SIGTERM`);
      t.truthy(exit, 'the api was still running 12 s after SIGTERM');
      t.is(exit?.code, 0);
      t.true(exit !== null && exit.at - termAt < EXIT_BOUND_MS, `exit ${exit && exit.at - termAt} ms after SIGTERM`);

      // Refused connections (nothing sent, the listener is closed) are the only acceptable failure.
      t.deepEqual(
        outcomes.filter((o) => o.error && o.error !== 'ECONNREFUSED').map(describeOutcome),
        [],
        'requests reset or cut',
      );
      t.deepEqual(
        outcomes.filter((o) => o.sentAt < termAt && o.status === undefined).map(describeOutcome),
        [],
        'requests sent before SIGTERM without an answer',
      );
      t.deepEqual(
        outcomes
          .filter((o) => o.status !== undefined && o.status !== 200 && o.status !== 201)
          .map((o) => `${describeOutcome(o)} ${o.body}`),
        [],
      );

      // Every socket still answering after SIGTERM was closed by a Connection: close answer, not dropped.
      const lastBySocket = new Map<number, Outcome>();
      for (const o of [...outcomes].filter((x) => x.status !== undefined).sort((a, b) => a.doneAt! - b.doneAt!))
        lastBySocket.set(o.socket, o);
      const usedAfter = new Set(
        outcomes.filter((o) => o.doneAt! >= termAt && o.status !== undefined).map((o) => o.socket),
      );
      t.true(usedAfter.size > 0, 'no request was answered after SIGTERM');
      for (const id of usedAfter) t.is(lastBySocket.get(id)!.connection, 'close', `last answer on socket ${id}`);

      // The client knows which writes happened: stored points are exactly the answered 201s.
      const created = outcomes.filter((o) => o.method === 'POST' && o.status === 201).map((o) => o.marker!);
      const stored = await s.db('gps_points').where('device_id', 'like', `${prefix}%`).pluck('device_id');
      t.true(created.length > 5);
      t.deepEqual([...stored].sort(), [...created].sort());
      idleAgent.destroy();
    } finally {
      await api.kill();
    }
  },
);

test.serial(
  'draining: in-flight and keep-alive arrivals are answered with Connection: close; idle sockets do not hold the exit',
  async (t) => {
    const s = stack();
    const key = await loadKey(s.db);
    const { api, port } = await startApiProcess(s);
    try {
      const idleAgent = new http.Agent({ keepAlive: true });
      t.deepEqual(
        (await Promise.all([0, 1, 2].map(() => send(idleAgent, port, key, 'GET', '/v1/gps?limit=1')))).map(
          (o) => o.status,
        ),
        [200, 200, 200],
      );
      const probeAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      const first = await send(probeAgent, port, key, 'GET', '/v1/gps?limit=1');
      t.is(first.status, 200);
      t.not(first.connection, 'close');

      // A slow upload: headers and the start of the body now, the rest well after SIGTERM.
      const payload = JSON.stringify(gpsBody({ device_id: `slow-${randomBytes(4).toString('hex')}` }));
      const slowReq = http.request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/gps',
        agent: false,
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
        },
      });
      const slow = new Promise<Outcome>((resolve) => {
        const o: Outcome = { method: 'POST', path: '/v1/gps', sentAt: Date.now(), socket: -1 };
        slowReq.on('response', (res: http.IncomingMessage) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c));
          res.on('end', () =>
            resolve({ ...o, status: res.statusCode, connection: res.headers.connection, body: text }),
          );
        });
        slowReq.on('error', (err: NodeJS.ErrnoException) => resolve({ ...o, error: err.code ?? err.message }));
      });
      slowReq.write(payload.slice(0, 20));
      await sleep(300);

      const termAt = Date.now();
      api.child.kill('SIGTERM');
      await api.waitForLog('api draining');
      // A request on a socket that was idle when the drain began is answered, and told to close.
      const onIdle = await send(probeAgent, port, key, 'GET', '/v1/gps?limit=1');
      t.is(onIdle.error, undefined);
      t.is(onIdle.status, 200);
      t.is(onIdle.connection, 'close');

      // The upload in flight since before SIGTERM outlives the idle sockets' grace and completes.
      await sleep(1500);
      slowReq.end(payload.slice(20));
      const done = await slow;
      t.is(done.error, undefined);
      t.is(done.status, 201, done.body);
      t.is(done.connection, 'close');
      t.is((await s.db('gps_points').where('id', JSON.parse(done.body!).data.id)).length, 1);

      const exit = await Promise.race([api.exited, sleep(12_000).then(() => null)]);
      t.is(exit?.code, 0);
      t.true(exit !== null && exit.at - termAt < EXIT_BOUND_MS, `exit ${exit && exit.at - termAt} ms after SIGTERM`);
      idleAgent.destroy();
      probeAgent.destroy();
    } finally {
      await api.kill();
    }
  },
);

/**
 * Opens a socket, runs `beforeWrite`, writes `requests` in one write and reads until the server
 * closes the socket.
 */
async function pipeline(
  port: number,
  requests: string[],
  beforeWrite: () => Promise<unknown> = async () => undefined,
): Promise<{ statuses: number[]; connections: string[] }> {
  const socket = net.connect(port, '127.0.0.1');
  let raw = '';
  socket.on('data', (d: Buffer) => (raw += d.toString('latin1')));
  const closed = new Promise((resolve) => socket.on('close', resolve));
  socket.on('error', () => undefined);
  await new Promise((resolve) => socket.once('connect', resolve));
  await beforeWrite();
  socket.write(requests.join(''));
  await Promise.race([closed, sleep(5000)]);
  socket.destroy();
  return {
    // An answer's status line follows the previous answer's body directly.
    statuses: [...raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])),
    connections: [...raw.matchAll(/^Connection: (\S+)/gim)].map((m) => m[1].toLowerCase()),
  };
}

function postGps(key: string, deviceId: string, extraHeaders = ''): string {
  const body = JSON.stringify(gpsBody({ device_id: deviceId }));
  return (
    `POST /v1/gps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n${extraHeaders}\r\n${body}`
  );
}

test.serial(
  'requests pipelined on one socket while draining are all run and answered; only the last says Connection: close',
  async (t) => {
    const s = stack();
    const key = await loadKey(s.db);
    const { api, port } = await startApiProcess(s);
    const device = `pipe-${randomBytes(4).toString('hex')}`;
    try {
      // A keep-alive socket opened before SIGTERM; the requests are written once the drain has begun.
      const answered = await pipeline(
        port,
        [1, 2, 3].map((i) => postGps(key, `${device}-${i}`)),
        async () => {
          api.child.kill('SIGTERM');
          await api.waitForLog('api draining');
        },
      );
      t.deepEqual(answered.statuses, [201, 201, 201]);
      t.deepEqual(answered.connections, ['keep-alive', 'keep-alive', 'close']);
      const stored = await s.db('gps_points').where('device_id', 'like', `${device}-%`).count({ n: '*' });
      t.is(Number(stored[0].n), 3);
      t.is((await Promise.race([api.exited, sleep(12_000).then(() => null)]))?.code, 0);
    } finally {
      await api.kill();
    }
  },
);

test.serial('a request pipelined behind an answer that closes its socket is not run', async (t) => {
  const s = stack();
  const key = await loadKey(s.db);
  const device = `behind-close-${randomBytes(4).toString('hex')}`;
  // The first request asks for Connection: close: it is answered (its POST was stored), and the
  // requests behind it are neither run nor refused in its place: the client sees them unanswered
  // and may send them again.
  const r = await pipeline(s.api.port, [
    postGps(key, `${device}-1`, 'Connection: close\r\n'),
    postGps(key, `${device}-2`),
    postGps(key, `${device}-3`),
  ]);
  t.deepEqual(r.statuses, [201]);
  t.deepEqual(r.connections, ['close']);
  const stored = await s.db('gps_points').where('device_id', 'like', `${device}-%`).pluck('device_id');
  t.deepEqual(stored, [`${device}-1`]);
});

test.serial(
  'a WebSocket forwarded to realtime does not hold a draining api: the tunnel is closed and the client reconnects elsewhere',
  async (t) => {
    const s = stack();
    const { api, port } = await startApiProcess(s);
    try {
      const ws = await connect(`ws://127.0.0.1:${port}`);
      // The tunnel works: a subscription round trip through the api to realtime.
      t.not((await ws.subscribe('vessels')).type, 'error');
      const termAt = Date.now();
      api.child.kill('SIGTERM');
      const closed = await Promise.race([ws.closed, sleep(10_000).then(() => null)]);
      t.truthy(closed, 'the forwarded WebSocket stayed open');
      const exit = await Promise.race([api.exited, sleep(10_000).then(() => null)]);
      t.is(exit?.code, 0);
      t.true(exit !== null && exit.at - termAt < EXIT_BOUND_MS, `exit ${exit && exit.at - termAt} ms after SIGTERM`);
      // The realtime instance itself stays up for the reconnect.
      const again = await connect(`ws://127.0.0.1:${s.realtime[0].port}`);
      again.close();
    } finally {
      await api.kill();
    }
  },
);

test.serial(
  'DRAIN_TIMEOUT_MS bounds the drain: a request that never completes is cut there and the process still exits cleanly',
  async (t) => {
    const s = stack();
    const key = await loadKey(s.db);
    const { api, port } = await startApiProcess(s, { DRAIN_TIMEOUT_MS: '1500' });
    try {
      // An upload that stops half-way and never finishes.
      const stuck = http.request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/gps',
        agent: false,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': 1000 },
      });
      const outcome = new Promise<string>((resolve) => {
        stuck.on('response', (res) => resolve(`answered ${res.statusCode}`));
        stuck.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      });
      stuck.write('{"latitude": 52.5');
      await sleep(300);
      const termAt = Date.now();
      api.child.kill('SIGTERM');
      const exit = await Promise.race([api.exited, sleep(10_000).then(() => null)]);
      t.is(exit?.code, 0);
      const ms = exit ? exit.at - termAt : Infinity;
      t.true(ms >= 1400 && ms < EXIT_BOUND_MS, `exit ${ms} ms after SIGTERM`);
      t.is(await outcome, 'ECONNRESET');
      t.like(
        api.logs.find((l) => l.msg === 'drain deadline reached: requests still in flight were cut'),
        { cut: 1, deadlineMs: 1500 },
      );
    } finally {
      await api.kill();
    }
  },
);
