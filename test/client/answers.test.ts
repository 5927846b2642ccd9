import test from 'ava';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiClient, isTextContentType, TypedApiClient } from '../../shared/client';
import { unzip } from '../export/archive';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

/** The first-party client's answers: binary bodies as bytes (audit F7), results typed by status (F15). */
// Workers: the data export is made by the export worker.
const stack = useStack(test, { workers: true });

/** Bytes that are not UTF-8 (a ZIP's are not): decoding them as text would replace them with U+FFFD. */
const BINARY = Uint8Array.from([0x50, 0x4b, 0x03, 0x04, 0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x9f]);

async function bytesServer(type: string) {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': type });
    res.end(Buffer.from(BINARY));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, close: () => new Promise<void>((r) => server.close(() => r())) };
}

test('binary answers come back as their bytes, text answers as text', async (t) => {
  for (const type of ['application/zip', 'application/octet-stream', 'image/png', 'application/pdf']) {
    const srv = await bytesServer(type);
    try {
      const r = await new ApiClient({ baseUrl: srv.url }).request('GET', '/x', { auth: { anonymous: true } });
      t.true(r.body instanceof Uint8Array, type);
      t.deepEqual([...(r.body as Uint8Array)], [...BINARY], type);
      t.is(r.text, '');
    } finally {
      await srv.close();
    }
  }
  for (const type of ['application/json', 'text/plain; charset=utf-8', 'application/gpx+xml', 'text/html', '']) {
    t.true(isTextContentType(type), type);
  }
  for (const type of ['application/zip', 'image/png', 'application/octet-stream']) t.false(isTextContentType(type));
});

test('call(get_v1_user_export) returns the archive intact', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { username: 'exporting' });
  const { key } = await createKey({ userId: user.id, scopes: ['account:export'] });
  const client = new TypedApiClient({ baseUrl: s.url });
  const r = await client.call('get_v1_user_export', { auth: { userToken: key } });
  t.is(r.status, 200, r.text);
  t.is(r.headers.get('content-type'), 'application/zip');
  if (!r.ok) return t.fail(r.text);
  // Typed as bytes: operations.ts gives the ZIP download Uint8Array.
  const bytes: Uint8Array = r.body;
  t.true(bytes instanceof Uint8Array);
  const files = await unzip(Buffer.from(bytes));
  t.deepEqual([...files.keys()].sort(), ['README.txt', 'data.json', 'report.pdf']);
  t.is(JSON.parse(files.get('data.json')!.toString('utf8')).exportInfo.format, 'zip');
});

test('an error answer is typed as the error body, a 2xx as the operation answer', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { username: 'typed_err', roles: ['role_admin'] });
  const client = new TypedApiClient({ baseUrl: s.url });
  const r = await client.call('get_v1_users_id', {
    auth: { userToken: user.token },
    params: { id: '00000000-0000-4000-8000-000000000000' },
  });
  t.is(r.status, 404);
  // @ts-expect-error: not narrowed by `ok`, the body may be an error and has no `data`.
  t.is(r.body.data, undefined);
  if (r.ok) return t.fail('404 is not ok');
  // Narrowed: the Error component ({error, message, details?}) or the client's own AUTH_REQUIRED.
  const error: string = r.body.error;
  t.is(error, 'NotFound');
  t.is(typeof r.body.message, 'string');
  const ok = await client.call('get_v1_users_id', { auth: { userToken: user.token }, params: { id: user.id } });
  if (!ok.ok) return t.fail(ok.text);
  const username: string = ok.body.data.username;
  t.is(username, 'typed_err');
  const notSent = await client.call('get_v1_users_id', { auth: { userToken: '' }, params: { id: user.id } });
  t.false(notSent.ok);
  if (!notSent.ok) t.is(notSent.body.error, 'AUTH_REQUIRED');
});
