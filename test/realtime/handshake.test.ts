import test from 'ava';
import { createUser } from '../helpers/factories';
import { rawRequest } from '../helpers/rawHttp';
import type { Stack } from '../helpers/stack';
import { useStack } from '../helpers/stack';
import { connect, wsBase } from '../helpers/wsClient';
import { orAfter } from '../helpers/wait';

const stack = useStack(test, { realtime: 1 });

const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

/** Both ways in: the api port (forwarded to realtime) and the realtime port itself. */
const entries = (s: Stack) => [
  { name: 'api port', port: s.api.port, instance: undefined },
  { name: 'realtime port', port: s.realtime[0].port, instance: 0 },
];

function handshake(path: string, headers: Record<string, string>): string {
  const all = {
    Host: 'x',
    Upgrade: 'websocket',
    Connection: 'Upgrade',
    'Sec-WebSocket-Key': KEY,
    'Sec-WebSocket-Version': '13',
    ...headers,
  };
  return `GET ${path} HTTP/1.1\r\n${Object.entries(all)
    .filter(([, v]) => v !== '')
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n')}\r\n\r\n`;
}

test('a frame over the size limit closes the connection with 1009 and ends the TCP socket, on both ports', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  for (const { name, instance } of entries(s)) {
    const conn = await connect(wsBase(s, instance), { token: user.token });
    const errors: string[] = [];
    conn.ws.on('error', (err) => errors.push(err.message));
    const tcpClosed = new Promise<void>((resolve) =>
      (conn.ws as unknown as { _socket: NodeJS.EventEmitter })._socket.once('close', () => resolve()),
    );
    conn.ws.send(Buffer.alloc(10 * 1024 * 1024, 1));
    const closed = await orAfter(conn.closed, 8000, null);
    t.is(closed?.code, 1009, `${name}: ${JSON.stringify(closed)} errors=${errors.join('; ')}`);
    const ended = await orAfter(
      tcpClosed.then(() => true),
      5000,
      false,
    );
    t.true(ended, `${name}: TCP connection left open`);
    // Nothing but WebSocket frames came down the upgraded stream (raw HTTP bytes read as a bad frame).
    t.false(
      errors.some((e) => /Invalid WebSocket frame/.test(e)),
      `${name}: ${errors.join('; ')}`,
    );
  }
});

test('a bad Sec-WebSocket-Key is a JSON 400 before the upgrade, on both ports', async (t) => {
  const s = stack();
  for (const { name, port } of entries(s)) {
    for (const key of ['bad', '', 'dGhlIHNhbXBsZSBub25jZQ']) {
      const r = await rawRequest(port, handshake('/v1/ws', { 'Sec-WebSocket-Key': key }));
      t.is(r.status, 400, `${name} key=${key}: ${r.raw}`);
      t.is(r.body.error, 'BadRequest', name);
      t.regex(r.body.message, /Sec-WebSocket-Key/, name);
      t.regex(r.headers['content-type'], /application\/json/);
      t.true(r.closed, `${name}: connection left open`);
    }
  }
});

test('a wrong Sec-WebSocket-Version is a JSON 400 naming the supported version, on both ports', async (t) => {
  const s = stack();
  for (const { name, port } of entries(s)) {
    const r = await rawRequest(port, handshake('/v1/ws', { 'Sec-WebSocket-Version': '12' }));
    t.is(r.status, 400, `${name}: ${r.raw}`);
    t.regex(r.body.message, /Sec-WebSocket-Version/, name);
    t.is(r.headers['sec-websocket-version'], '13, 8');
  }
});

test('an upgrade on an unknown path is a JSON 404, on both ports', async (t) => {
  const s = stack();
  for (const { name, port } of entries(s)) {
    for (const path of ['/v1/nope', '/', '/v1/ws/extra']) {
      const r = await rawRequest(port, handshake(path, {}));
      t.is(r.status, 404, `${name} ${path}: ${r.raw}`);
      t.is(r.body.error, 'NotFound', name);
      t.is(typeof r.body.message, 'string');
      t.true(r.closed, `${name}: connection left open`);
    }
  }
});

test('a malformed request on the realtime port gets a JSON 400 too', async (t) => {
  const s = stack();
  const r = await rawRequest(s.realtime[0].port, 'FOO BAR /v1/ws HTTP/1.1\r\nHost: x\r\n\r\n');
  t.is(r.status, 400, r.raw);
  t.is(r.body.error, 'BadRequest');
});

test('a plain HTTP request to the realtime port is a JSON 426 Upgrade Required on /v1/ws, 404 elsewhere', async (t) => {
  const s = stack();
  for (const path of ['/v1/health', '/']) {
    const r = await fetch(`http://127.0.0.1:${s.realtime[0].port}${path}`);
    t.is(r.status, 404, path);
    t.is(((await r.json()) as { error: string }).error, 'NotFound');
  }
  // A body promised and not sent is not waited for: answered, and the connection closed.
  const promised = await rawRequest(
    s.realtime[0].port,
    'POST /v1/ws HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\nabc',
    3000,
  );
  t.is(promised.status, 426);
  t.true(promised.closed);
  for (const path of ['/v1/ws', '/V1/WS/']) {
    const r = await fetch(`http://127.0.0.1:${s.realtime[0].port}${path}`);
    t.is(r.status, 426, path);
    t.regex(r.headers.get('content-type') ?? '', /^application\/json/);
    const body = (await r.json()) as { error: string; message: string };
    t.deepEqual(Object.keys(body).sort(), ['error', 'message']);
    t.is(body.error, 'UpgradeRequired');
    t.regex(body.message, /WebSocket/);
  }
});

test('the WebSocket endpoint answers in every spelling the REST routes are served in: any case, one trailing slash', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  for (const { name, instance } of entries(s)) {
    for (const path of ['/V1/WS', '/v1/ws/', '/v1/Ws/']) {
      const conn = await connect(wsBase(s, instance), { token: user.token, path });
      t.is(conn.ws.readyState, conn.ws.OPEN, `${name} ${path}`);
      conn.ws.close();
    }
  }
});

test('a plain request to /v1/ws on the api port is a 426 naming the protocol to upgrade to', async (t) => {
  const s = stack();
  for (const path of ['/v1/ws', '/V1/WS/']) {
    const r = await fetch(`${s.url}${path}`);
    t.is(r.status, 426, path);
    t.is(r.headers.get('upgrade'), 'websocket', path);
    t.is(((await r.json()) as { error: string }).error, 'UpgradeRequired');
  }
  const direct = await fetch(`http://127.0.0.1:${s.realtime[0].port}/v1/ws`);
  t.is(direct.status, 426);
  t.is(direct.headers.get('upgrade'), 'websocket');
});

test('a handshake with two Authorization lines is refused with 401, on both ports', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  for (const { name, port } of entries(s)) {
    const head = handshake('/v1/ws', { Authorization: `Bearer ${user.token}` }).replace(
      '\r\n\r\n',
      '\r\nAuthorization: Bearer someone-else\r\n\r\n',
    );
    const r = await rawRequest(port, head);
    t.is(r.status, 401, `${name}: ${r.raw}`);
    t.regex(r.body.message, /one Authorization header/);
  }
});
