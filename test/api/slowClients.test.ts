import test from 'ava';
import { rawRequest } from '../helpers/rawHttp';
import { useStack } from '../helpers/stack';

// A short request timeout (production: 30 s, headers 10 s) so the test waits seconds, not minutes.
const stack = useStack(test, { env: { HTTP_REQUEST_TIMEOUT_MS: '1500' }, realtime: 1 });

const port = () => Number(new URL(stack().url).port);

test('a body that stops arriving is answered 408 (or the connection closed) once the request timeout passes', async (t) => {
  const started = Date.now();
  const r = await rawRequest(
    port(),
    'POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"em',
    8000,
  );
  const took = Date.now() - started;
  t.true(r.closed, `connection still open after ${took} ms`);
  t.true(took < 5000, `took ${took} ms`);
  if (r.status) {
    t.is(r.status, 408, r.raw);
    t.is(r.body.error, 'RequestTimeout');
  }
});

test('headers that stop arriving are answered 408 within the headers timeout', async (t) => {
  const started = Date.now();
  const r = await rawRequest(port(), 'GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: ', 8000);
  const took = Date.now() - started;
  t.is(r.status, 408, r.raw);
  t.is(r.body.error, 'RequestTimeout');
  t.true(took < 3000, `took ${took} ms`);
});

test('the realtime port keeps the same timeouts: a handshake whose headers stop arriving is answered 408', async (t) => {
  // Node's defaults there were 60 s for headers, checked every 30 s.
  const started = Date.now();
  const r = await rawRequest(
    stack().realtime[0].port,
    'GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nX-Slow: ',
    8000,
  );
  const took = Date.now() - started;
  t.is(r.status, 408, r.raw);
  t.true(r.closed);
  t.true(took < 3000, `took ${took} ms`);
});
