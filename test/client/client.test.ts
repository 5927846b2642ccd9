import test from 'ava';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';
import { startRealtime } from '../../realtime/server';
import { decodeEnvelope, encodeEnvelope } from '../../shared/proto';
import { ApiClient, CallAuth, SocketFactory, WsClient } from '../../shared/client';
import type { WsServerMessage } from '../../shared/client';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { eventually as waitFor, sleep } from '../helpers/wait';

const stack = useStack(test, { realtime: 1 });

/** A local server that counts the requests reaching it and answers 429 with Retry-After on /limited. */
async function countingServer() {
  const seen: Array<{ method: string; url: string; authorization?: string }> = [];
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method!, url: req.url!, authorization: req.headers.authorization });
    if (req.url === '/limited') {
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '7' });
      return res.end(JSON.stringify({ error: 'TooManyRequests', message: 'slow down' }));
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { seen, url, close: () => new Promise<void>((r) => server.close(() => r())) };
}

test('fail-closed: no auth choice → 401 AUTH_REQUIRED and no request leaves; no fallback to the system key', async (t) => {
  const srv = await countingServer();
  try {
    const client = new ApiClient({ baseUrl: srv.url });
    const bad: unknown[] = [
      undefined,
      {},
      { userToken: '' },
      { userToken: undefined },
      { systemKey: '  ' },
      { anonymous: false },
      { userToken: 'a', systemKey: 'b' },
    ];
    for (const auth of bad) {
      const r = await client.request('GET', '/v1/users/me', { auth: auth as CallAuth });
      t.is(r.status, 401);
      t.is((r.body as { error: string }).error, 'AUTH_REQUIRED');
      t.true(r.notSent);
    }
    t.is(srv.seen.length, 0, 'nothing reached the server');
    // A header passed by hand does not carry a credential past the stated choice.
    await client.request('GET', '/a', { auth: { anonymous: true }, headers: { Authorization: 'Bearer sneaky' } });
    await client.request('GET', '/b', { auth: { userToken: 'user-token' } });
    await client.request('GET', '/c', { auth: { systemKey: 'system-key' } });
    t.deepEqual(
      srv.seen.map((s) => [s.url, s.authorization]),
      [
        ['/a', undefined],
        ['/b', 'Bearer user-token'],
        ['/c', 'Bearer system-key'],
      ],
    );
    const limited = await client.request('GET', '/limited', { auth: { anonymous: true } });
    t.is(limited.status, 429);
    t.is(limited.retryAfter, 7);
  } finally {
    await srv.close();
  }
});

test('against the real api: a user token acts as the user, anonymous gets 401 from the server', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const client = new ApiClient({ baseUrl: s.url });
  const me = await client.request<{ data: { id: string } }>('GET', '/v1/users/me', { auth: { userToken: user.token } });
  t.is(me.status, 200);
  t.is(me.body.data.id, user.id);
  const anon = await client.request('GET', '/v1/users/me', { auth: { anonymous: true } });
  t.is(anon.status, 401);
  t.falsy(anon.notSent);
});

const nodeSocket: SocketFactory = (url, protocols, headers) =>
  new WebSocket(url, protocols, { headers }) as unknown as ReturnType<SocketFactory>;

test('WebSocket client: ticket auth, reconnect with backoff and resubscribe after the realtime process restarts', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const messages: WsServerMessage[] = [];
  const ws = new WsClient({ baseUrl: s.url, auth: { userToken: user.token }, socket: nodeSocket, minDelayMs: 50 });
  ws.on('message', (m) => messages.push(m));
  await ws.connect();
  ws.subscribe('public:news');
  await waitFor(() => messages.some((m) => m.type === 'message' && m.data === 'Subscribed to public:news'));
  const pong = messages.length;
  t.true(ws.sendJson({ type: 'ping' }));
  await waitFor(() => messages.slice(pong).some((m) => m.type === 'pong'));

  // Protobuf frames: an encoded WsEnvelope ping is answered with a binary pong.
  const binary: Uint8Array[] = [];
  ws.on('binary', (b) => binary.push(b));
  t.true(ws.sendBinary(encodeEnvelope('ping', { timestamp: 42 }, 'r1')));
  await waitFor(() => binary.length > 0);
  const env = decodeEnvelope(binary[0]);
  t.is(env.payload, 'pong');
  t.is(env.requestId, 'r1');

  // Restart the realtime process on the same port: the client reconnects with a new ticket and resubscribes.
  const port = s.realtime[0].port;
  await s.realtime[0].close();
  messages.length = 0;
  s.realtime[0] = await startRealtime(s.config, { port });
  await waitFor(() => ws.opens === 2, 20_000);
  await waitFor(() => messages.some((m) => m.type === 'message' && m.data === 'Subscribed to public:news'));
  t.is(ws.opens, 2);
  ws.close();

  await t.throwsAsync(() => new WsClient({ baseUrl: s.url, auth: {} as CallAuth, socket: nodeSocket }).connect(), {
    message: 'AUTH_REQUIRED',
  });
});

/** A fetch that counts the WebSocket tickets asked for. */
function ticketCounter(): { fetch: typeof fetch; tickets: () => number } {
  let n = 0;
  return {
    fetch: (input, init) => {
      if (String(input).endsWith('/v1/ws/ticket')) n++;
      return fetch(input, init);
    },
    tickets: () => n,
  };
}

test.serial(
  'WebSocket client: a reconnect whose ticket is refused (the session died while it was down) is final too',
  async (t) => {
    const s = stack();
    const user = await createUser(s.db);
    const { fetch: countingFetch, tickets } = ticketCounter();
    const sockets: Array<{ close(code?: number): void }> = [];
    const ws = new WsClient({
      baseUrl: s.url,
      auth: { userToken: user.token },
      socket: (u, p, h) => {
        const socket = nodeSocket(u, p, h);
        sockets.push(socket);
        return socket;
      },
      fetch: countingFetch,
      minDelayMs: 300,
      maxDelayMs: 300,
    });
    const terminated: Array<{ code: number; reason: string }> = [];
    const closes: Array<{ code: number; reason: string }> = [];
    ws.on('terminated', (c) => terminated.push(c));
    ws.on('close', (c) => closes.push(c));
    ws.on('error', () => undefined);
    await ws.connect();
    // The connection drops (not a close that ends it), and the session is revoked meanwhile.
    sockets[0].close(1000);
    await waitFor(() => closes.length > 0);
    t.is(closes[0].code, 1000);
    const del = await s.request('DELETE', `/v1/sessions/${user.token}?reason=revoked`, { token: s.systemKey });
    t.is(del.status, 204);
    await waitFor(() => terminated.length > 0);
    t.is(terminated[0].code, 4001);
    t.regex(terminated[0].reason, /401/);
    await sleep(1000);
    t.is(tickets(), 2, 'one refused ticket, then nothing');
    t.is(ws.opens, 1);
    ws.close();
  },
);

// Serial (ava runs it before the concurrent tests): the restart test above would close its socket with 1012.
test.serial(
  'WebSocket client: after a close with 4004 (session revoked) it does not reconnect and emits terminated',
  async (t) => {
    const s = stack();
    const user = await createUser(s.db);
    const { fetch: countingFetch, tickets } = ticketCounter();
    const ws = new WsClient({
      baseUrl: s.url,
      auth: { userToken: user.token },
      socket: nodeSocket,
      fetch: countingFetch,
      minDelayMs: 20,
      maxDelayMs: 40,
    });
    const closes: Array<{ code: number; reason: string }> = [];
    const terminated: Array<{ code: number; reason: string }> = [];
    const errors: Error[] = [];
    ws.on('close', (c) => closes.push(c));
    ws.on('terminated', (c) => terminated.push(c));
    ws.on('error', (e) => errors.push(e));
    await ws.connect();
    t.is(tickets(), 1);

    const del = await s.request('DELETE', `/v1/sessions/${user.token}?reason=revoked`, { token: s.systemKey });
    t.is(del.status, 204);
    await waitFor(() => closes.length > 0);
    t.is(closes[0].code, 4004);
    // Many backoff delays later: no ticket was asked for with the dead token, nothing reopened.
    await sleep(600);
    t.is(tickets(), 1, 'no ticket request after the 4004 close');
    t.is(ws.opens, 1);
    t.deepEqual(errors, []);
    t.deepEqual(terminated, [closes[0]]);
    t.deepEqual(ws.terminated, closes[0]);
    ws.close();
  },
);
