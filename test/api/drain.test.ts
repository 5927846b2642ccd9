import test from 'ava';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { describeOutcome, loadKey, Outcome, send, startLoad } from '../helpers/httpLoad';
import { ServiceProcess, spawnService } from '../helpers/processes';
import { Stack, useStack } from '../helpers/stack';
import { connect, publish } from '../helpers/wsClient';
import { gpsBody } from '../helpers/tracking';
import { eventually, orAfter, sleep } from '../helpers/wait';

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
      const exit = await orAfter(api.exited, 12_000, null);
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

      const exit = await orAfter(api.exited, 12_000, null);
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
  await orAfter(closed, 5000, undefined);
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
      t.is((await orAfter(api.exited, 12_000, null))?.code, 0);
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
  'a WebSocket forwarded to realtime does not hold a draining api: the client gets 1012 "service restart" and reconnects elsewhere',
  async (t) => {
    const s = stack();
    const { api, port } = await startApiProcess(s);
    try {
      const ws = await connect(`ws://127.0.0.1:${port}`);
      // The tunnel works: a subscription round trip through the api to realtime.
      t.not((await ws.subscribe('vessels')).type, 'error');
      const termAt = Date.now();
      api.child.kill('SIGTERM');
      const closed = await orAfter(ws.closed, 10_000, null);
      // What realtime's own drain sends (docs/websocket.md): reconnect at once. A cut tunnel reads 1006.
      t.deepEqual(closed, { code: 1012, reason: 'service restart' });
      const exit = await orAfter(api.exited, 10_000, null);
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

/**
 * A TCP proxy in front of realtime whose realtime→api direction passes only as many bytes as the
 * test allows: it can stop realtime's output in the middle of a frame.
 */
async function startGate(target: number) {
  let allowed = Infinity;
  let passed = 0;
  const held: Buffer[] = [];
  const sockets: net.Socket[] = [];
  let toApi: net.Socket | undefined;
  const flush = () => {
    while (toApi && held.length && passed < allowed) {
      const chunk = held.shift()!;
      const n = Math.min(chunk.length, allowed - passed);
      if (n < chunk.length) held.unshift(chunk.subarray(n));
      toApi.write(chunk.subarray(0, n));
      passed += n;
    }
  };
  const server = net.createServer((fromApi) => {
    const realtime = net.connect(target, '127.0.0.1');
    toApi = fromApi;
    sockets.push(fromApi, realtime);
    fromApi.pipe(realtime);
    realtime.on('data', (d: Buffer) => (held.push(d), flush()));
    realtime.on('close', () => fromApi.end());
    fromApi.on('close', () => realtime.destroy());
    fromApi.on('error', () => undefined);
    realtime.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    passed: () => passed,
    allowed: () => allowed,
    /** From now on `bytes` more pass, then nothing. */
    hold(bytes: number) {
      allowed = passed + bytes;
    },
    open() {
      allowed = Infinity;
      flush();
    },
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** The frames of a server→client byte stream (unmasked); `rest` is an incomplete frame at the end. */
function serverFrames(buf: Buffer): { frames: Array<{ fin: boolean; opcode: number; payload: Buffer }>; rest: number } {
  const frames: Array<{ fin: boolean; opcode: number; payload: Buffer }> = [];
  let i = 0;
  for (;;) {
    if (buf.length - i < 2) break;
    const len7 = buf[i + 1] & 0x7f;
    const headLength = len7 === 126 ? 4 : len7 === 127 ? 10 : 2;
    if (buf.length - i < headLength) break;
    const n = len7 === 126 ? buf.readUInt16BE(i + 2) : len7 === 127 ? Number(buf.readBigUInt64BE(i + 2)) : len7;
    if (buf.length - i < headLength + n) break;
    frames.push({
      fin: (buf[i] & 0x80) !== 0,
      opcode: buf[i] & 0x0f,
      payload: buf.subarray(i + headLength, i + headLength + n),
    });
    i += headLength + n;
  }
  return { frames, rest: buf.length - i };
}

/** A masked client text frame (mask key 0: the payload is sent as is). */
function clientText(text: string): Buffer {
  const payload = Buffer.from(text);
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length, 0, 0, 0, 0]), payload]);
}

test.serial(
  'a draining api puts 1012 after the frame realtime is in the middle of: the client gets the whole large message, then the close',
  async (t) => {
    const s = stack();
    const gate = await startGate(s.realtime[0].port);
    const { api, port } = await startApiProcess(s, { REALTIME_PORT: String(gate.port) });
    const client = net.connect(port, '127.0.0.1');
    try {
      // A hand-made client: the test sees every byte, so it knows when part of a frame arrived.
      let received = Buffer.alloc(0);
      client.on('data', (d: Buffer) => (received = Buffer.concat([received, d])));
      const clientClosed = new Promise<void>((resolve) => client.once('close', () => resolve()));
      client.on('error', () => undefined);
      client.write(
        'GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
      );
      const headEnd = (await eventually(() => received.indexOf('\r\n\r\n') + 1)) + 3;
      t.regex(received.toString('latin1', 0, 13), /^HTTP\/1\.1 101/);
      client.write(clientText(JSON.stringify({ type: 'subscribe', channel: 'vessels' })));
      await eventually(() =>
        serverFrames(received.subarray(headEnd)).frames.some((f) =>
          f.payload.toString().includes('"channel":"vessels"'),
        ),
      );

      // Realtime sends a 400 KB message; 1000 bytes of it (with its header) reach the client, then it stops.
      const before = received.length;
      gate.hold(1000);
      const big = { type: 'vesselsUpdate', data: { vessels: [{ name: 'v'.repeat(400_000) }] } };
      await publish(s, 'vessels', big);
      await eventually(() => gate.passed() === gate.allowed() && received.length === gate.passed());
      t.true(serverFrames(received.subarray(before)).rest > 0, 'the client is not in the middle of a frame');

      const termAt = Date.now();
      api.child.kill('SIGTERM');
      await api.waitForLog('api draining');
      // The drain has begun while realtime is mid-frame; now the rest of the frame (and whatever follows) comes.
      gate.open();
      await orAfter(clientClosed, 10_000, undefined);
      t.true(client.destroyed || client.readableEnded, 'the client connection stayed open');

      const { frames, rest } = serverFrames(received.subarray(before));
      t.is(rest, 0, 'a frame was cut');
      const data = frames.filter((f) => f.opcode === 0x1);
      t.is(data.length, 1);
      t.true(data[0].fin);
      t.deepEqual(JSON.parse(data[0].payload.toString()), big);
      // The close is the last thing on the wire: 1012 with realtime's reason, nothing from realtime after it.
      const last = frames[frames.length - 1];
      t.is(last.opcode, 0x8);
      t.is(last.payload.readUInt16BE(0), 1012);
      t.is(last.payload.subarray(2).toString(), 'service restart');

      const exit = await orAfter(api.exited, 10_000, null);
      t.is(exit?.code, 0);
      t.true(exit !== null && exit.at - termAt < EXIT_BOUND_MS, `exit ${exit && exit.at - termAt} ms after SIGTERM`);
    } finally {
      client.destroy();
      gate.close();
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
      const exit = await orAfter(api.exited, 10_000, null);
      t.is(exit?.code, 0);
      const ms = exit ? exit.at - termAt : Infinity;
      t.true(ms >= 1400 && ms < EXIT_BOUND_MS, `exit ${ms} ms after SIGTERM`);
      t.is(await outcome, 'ECONNRESET');
      t.like(
        api.logs.find((l) => l.msg === 'drain deadline reached: requests still in flight were cut'),
        // Each request cut is named by its method and route (never the values in its path).
        { cut: 1, deadlineMs: 1500, requests: [{ method: 'POST', route: '/v1/gps' }] },
      );
    } finally {
      await api.kill();
    }
  },
);
