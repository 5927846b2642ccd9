import test from 'ava';
import { rawRequest } from '../helpers/rawHttp';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

test('Upgrade: h2c (curl --http2 on http://) is ignored: the request is served as HTTP/1.1', async (t) => {
  const s = stack();
  const r = await rawRequest(
    s.api.port,
    'GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n' +
      'HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n',
  );
  t.is(r.status, 200, r.raw);
  t.is(r.body._links?.self, '/v1/health', r.raw);
  t.true(r.closed);
  const withBody = await rawRequest(
    s.api.port,
    'POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n' +
      'Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
  );
  t.is(withBody.status, 400, withBody.raw);
  t.regex(withBody.body.message, /Upgrade/);
});

test('a request with two Host lines, or a Host that is not a host, is a 400', async (t) => {
  const s = stack();
  for (const hosts of [['a.example', 'b.example'], ['a b'], ['x/y'], ['x@y']]) {
    const r = await rawRequest(
      s.api.port,
      `GET /v1/health HTTP/1.1\r\n${hosts.map((h) => `Host: ${h}\r\n`).join('')}\r\n`,
    );
    t.is(r.status, 400, `${hosts.join(' + ')}: ${r.raw}`);
    t.regex(r.body.message, /^Host: /);
  }
  for (const host of ['api.example.com:8080', '[::1]:3000', '127.0.0.1']) {
    const r = await rawRequest(s.api.port, `GET /v1/health HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    t.is(r.status, 200, `${host}: ${r.raw}`);
  }
});

test('a Transfer-Encoding other than chunked is a 501, an HTTP/2.0 request line a 505', async (t) => {
  const s = stack();
  const gz = await rawRequest(
    s.api.port,
    'POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
      'Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
  );
  t.is(gz.status, 501, gz.raw);
  t.regex(gz.body.message, /Transfer-Encoding/);
  // Any other version in a well-formed request line: 505, named as such.
  for (const version of ['2.0', '3.0', '1.2', '0.9']) {
    const r = await rawRequest(s.api.port, `GET /v1/health HTTP/${version}\r\nHost: x\r\n\r\n`);
    t.is(r.status, 505, `${version}: ${r.raw}`);
    t.is(r.body.error, 'HTTPVersionNotSupported', r.raw);
    t.regex(r.body.message, new RegExp(`HTTP/${version.replace('.', '\\.')} is not supported`));
  }
  const garbled = await rawRequest(s.api.port, 'GET /v1/health HTTP/x.1\r\nHost: x\r\n\r\n');
  t.is(garbled.status, 400, garbled.raw);
});

test('a URL too long is a 414, headers too large a 431', async (t) => {
  const s = stack();
  const long = await rawRequest(s.api.port, `GET /v1/users?q=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
  t.is(long.status, 414, long.raw.slice(0, 200));
  t.is(long.body.error, 'URITooLong');
  const headers = await rawRequest(
    s.api.port,
    `GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
  );
  t.is(headers.status, 431, headers.raw.slice(0, 200));
});

test('every answer says X-Content-Type-Options: nosniff', async (t) => {
  const s = stack();
  for (const path of ['/v1/health', '/v1/no-such-route', '/v1/users/me']) {
    const r = await fetch(`${s.url}${path}`);
    t.is(r.headers.get('x-content-type-options'), 'nosniff', `${path} ${r.status}`);
  }
  const refused = await rawRequest(s.api.port, 'GET /v1/health HTTP/1.1\r\n\r\n');
  t.is(refused.status, 400);
  t.is(refused.headers['x-content-type-options'], 'nosniff');
});

test('a 304 carries the Vary and the ETag form of the 200 it stands for', async (t) => {
  const s = stack();
  const head = 'GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n';
  const full = await rawRequest(s.api.port, `${head}\r\n`);
  t.is(full.status, 200);
  const etag = full.headers.etag;
  t.regex(etag, /^W\//);
  t.regex(full.headers.vary, /Accept-Encoding/);
  const again = await rawRequest(s.api.port, `${head}If-None-Match: ${etag}\r\n\r\n`);
  t.is(again.status, 304, again.raw);
  t.is(again.headers.etag, etag);
  t.regex(again.headers.vary ?? '', /Accept-Encoding/);
});

test('a WebSocket handshake over HTTP/1.0 or with a body is a 400', async (t) => {
  const s = stack();
  const base = `Host: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${KEY}\r\nSec-WebSocket-Version: 13\r\n`;
  const old = await rawRequest(s.api.port, `GET /v1/ws HTTP/1.0\r\n${base}\r\n`);
  t.is(old.status, 400, old.raw);
  t.regex(old.body.message, /HTTP\/1\.1/);
  const body = await rawRequest(s.api.port, `GET /v1/ws HTTP/1.1\r\n${base}Content-Length: 5\r\n\r\nhello`);
  t.is(body.status, 400, body.raw);
  t.regex(body.body.message, /no body/);
});

test('answers refused before the application runs say Cache-Control: no-store, as every other answer does', async (t) => {
  const s = stack();
  for (const head of [
    'FOO /v1/health HTTP/1.1\r\nHost: x\r\n\r\n', // 501, Node's parser
    'GET /v1/health HTTP/1.1\r\n\r\n', // 400, no Host
    'GET /v1/health HTTP/3.0\r\nHost: x\r\n\r\n', // 505, Node's parser
    'GET /v1/health HTTP/2.0\r\nHost: x\r\n\r\n', // 505, requestHeadProblem
  ]) {
    const r = await rawRequest(s.api.port, head);
    t.true(r.status >= 400, r.raw);
    t.regex(r.raw, /\r\nCache-Control: no-store\r\n/i, `${head.split('\r')[0]}: ${r.raw}`);
  }
});
