import test from 'ava';
import net from 'node:net';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

/**
 * Sends `head`, then (with a chunked head) body chunks without end until the server closes the
 * connection or 5 s pass; answers what came back, whether the server closed, and the bytes sent.
 */
function endlessBody(url: string, head: string): Promise<{ answer: string; closed: boolean; sent: number }> {
  const { port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => {
      socket.write(head);
      const chunk = `${(65536).toString(16)}\r\n${'a'.repeat(65536)}\r\n`;
      let sent = 0;
      const pump = () => {
        while (/chunked/i.test(head) && !socket.destroyed && sent < 500e6 && socket.write(chunk)) sent += 65536;
      };
      socket.on('drain', pump);
      pump();
      let answer = '';
      socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
      socket.on('error', () => undefined);
      const timer = setTimeout(() => {
        socket.destroy();
        resolve({ answer, closed: false, sent });
      }, 5000);
      socket.on('close', () => {
        clearTimeout(timer);
        resolve({ answer, closed: true, sent });
      });
    });
  });
}

test('a request refused before its body is read is answered, then its connection closed: the body is not drained', async (t) => {
  const s = stack();
  const r = await endlessBody(
    s.url,
    'POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n',
  );
  t.regex(r.answer, /^HTTP\/1\.1 415 /);
  t.regex(r.answer, /\r\nConnection: close\r\n/i);
  t.true(r.closed, `the connection stayed open; ${r.sent} bytes sent`);
  t.true(r.sent < 64e6, `${r.sent} bytes sent`);
});

test('an error answer to a request without a body keeps the connection', async (t) => {
  const s = stack();
  const r = await endlessBody(s.url, 'GET /v1/no-such-route HTTP/1.1\r\nHost: x\r\n\r\n');
  t.regex(r.answer, /^HTTP\/1\.1 404 /);
  t.notRegex(r.answer, /\r\nConnection: close\r\n/i);
  t.false(r.closed);
});

test('a credential revoked while the body is still arriving is refused: the credential is checked again once the body is in', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const body = JSON.stringify({ locale: 'de' });
  const { port } = new URL(s.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  socket.on('error', () => undefined);
  let answer = '';
  socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(
    `PATCH /v1/users/${user.id}/locale HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${user.token}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 3)}`,
  );
  await new Promise((r) => setTimeout(r, 200));
  const revoked = await s.request('DELETE', `/v1/sessions/${user.token}?reason=revoked`, { token: s.systemKey });
  t.is(revoked.status, 204);
  socket.write(body.slice(3));
  await new Promise((r) => setTimeout(r, 1000));
  socket.destroy();
  t.regex(answer, /^HTTP\/1\.1 401 /);
  t.is((await s.db('users').where('id', user.id).first()).preferred_locale, null);
});

/**
 * Sends a head with `Expect: 100-continue` and waits for the first answer line; answers it, and
 * (when it was 100 Continue and `body` is given) the final answer after sending the body.
 */
async function expectContinue(url: string, head: string, body?: string): Promise<{ first: string; final: string }> {
  const { port } = new URL(url);
  const socket = net.connect(Number(port), '127.0.0.1');
  socket.on('error', () => undefined);
  let answer = '';
  const arrived = (pattern: RegExp) =>
    new Promise<void>((resolve) => {
      const check = () => (pattern.test(answer) ? resolve() : socket.once('data', check));
      const timer = setTimeout(resolve, 3000);
      timer.unref();
      check();
    });
  socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(head);
  await arrived(/\r\n\r\n/);
  const first = answer.split('\r\n')[0];
  let final = '';
  if (first.includes(' 100 ') && body !== undefined) {
    const before = answer.length;
    socket.write(body);
    await arrived(/\r\n\r\n[\s\S]*HTTP\/1\.1 [2-5]\d\d [\s\S]*\r\n\r\n\{/);
    final = answer.slice(before).split('\r\n')[0] || answer.split('\r\n\r\n')[1]?.split('\r\n')[0] || '';
  }
  socket.destroy();
  return { first, final };
}

test('Expect: 100-continue is answered with the refusal, not Continue, when the credential fails', async (t) => {
  const s = stack();
  const r = await expectContinue(
    s.url,
    'POST /v1/devices HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer not-a-key\r\nExpect: 100-continue\r\n' +
      'Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n',
  );
  t.regex(r.first, /^HTTP\/1\.1 401 /);
});

test('Expect: 100-continue gets 100 Continue once the credential holds, then the answer to the body', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const body = JSON.stringify({ locale: 'de' });
  const r = await expectContinue(
    s.url,
    `PATCH /v1/users/${user.id}/locale HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${user.token}\r\n` +
      `Expect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
    body,
  );
  t.regex(r.first, /^HTTP\/1\.1 100 Continue/);
  t.regex(r.final, /^HTTP\/1\.1 200 /);
  t.is((await s.db('users').where('id', user.id).first()).preferred_locale, 'de');
});

test('without a credential, or without the permission, a write is refused before its body is read', async (t) => {
  const s = stack();
  const owner = await createUser(s.db);
  const narrow = await createKey({ userId: owner.id, scopes: ['devices:read'] });
  // A malformed body is not what is wrong: the access answer comes first.
  const anonymous = await s.request('POST', '/v1/devices', {
    headers: { 'content-type': 'application/json' },
    rawBody: '{"name": ',
  });
  t.is(anonymous.status, 401);
  const narrowed = await s.request('POST', '/v1/devices', {
    token: narrow.key,
    headers: { 'content-type': 'application/json' },
    rawBody: '{"name": ',
  });
  t.is(narrowed.status, 403);
  // Only the head and a piece of the body: answered at once, the connection closed, no Continue.
  for (const auth of ['', `Authorization: Bearer ${narrow.key}\r\n`]) {
    const r = await expectContinue(
      s.url,
      `POST /v1/devices HTTP/1.1\r\nHost: x\r\n${auth}Expect: 100-continue\r\n` +
        'Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n',
    );
    t.regex(r.first, auth ? /^HTTP\/1\.1 403 / : /^HTTP\/1\.1 401 /);
  }
});
