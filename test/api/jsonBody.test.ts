import test from 'ava';
import type { Context } from 'koa';
import { plainJsonLength } from '../../api/middleware/body';
import { createUser, TestUser } from '../helpers/factories';
import { rawRequest } from '../helpers/rawHttp';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

let admin: TestUser;

/** POST /v1/devices with exactly these body bytes and this content type, on its own connection. */
function post(type: string, body: Buffer) {
  const head =
    `POST /v1/devices HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${admin.token}\r\n` +
    `Content-Type: ${type}\r\nContent-Length: ${body.length}\r\n\r\n`;
  return rawRequest(stack().api.port, Buffer.concat([Buffer.from(head), body]));
}

/** What must not differ between the two parsers: status, error, and the stored name. */
const outcome = (r: Awaited<ReturnType<typeof post>>) => ({
  status: r.status,
  error: r.body?.error,
  message: r.body?.message,
  name: r.body?.data?.name,
});

test('a plain JSON body (read directly) is answered exactly as koa-body answers it', async (t) => {
  admin = await createUser(stack().db, { roles: ['role_admin'] });
  const bodies: Array<[string, Buffer]> = [
    ['object', Buffer.from('{"name":"Boat A"}')],
    ['leading whitespace', Buffer.from(' \n\t{"name":"Boat B"}')],
    ['byte order mark', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"name":"Boat C"}')])],
    ['multibyte', Buffer.from('{"name":"Bööt ∑ 🚤"}')],
    ['invalid UTF-8 in a string', Buffer.concat([Buffer.from('{"name":"A'), Buffer.from([0xff]), Buffer.from('"}')])],
    ['truncated', Buffer.from('{"name":')],
    ['a string', Buffer.from('"Boat"')],
    ['a number', Buffer.from('42')],
    ['an array', Buffer.from('[{"name":"Boat"}]')],
    ['whitespace only', Buffer.from('   ')],
    ['prototype poisoning', Buffer.from('{"name":"Boat","__proto__":{"admin":true}}')],
    ['trailing garbage', Buffer.from('{"name":"Boat"} x')],
  ];
  for (const [name, body] of bodies) {
    // application/vnd.api+json is JSON to koa-body but not to the fast path: the reference answer.
    const reference = outcome(await post('application/vnd.api+json', body));
    for (const type of ['application/json', 'application/json; charset=utf-8', 'Application/JSON;Charset=UTF-8']) {
      const fast = outcome(await post(type, body));
      t.deepEqual(fast, reference, `${name} as ${type}`);
    }
    t.true(reference.status < 500, `${name}: ${reference.status}`);
  }
  // The answers themselves, so two parsers agreeing on something wrong fails too.
  t.is(outcome(await post('application/json', bodies[2][1])).name, 'Boat C');
  t.is(outcome(await post('application/json', bodies[3][1])).name, 'Bööt ∑ 🚤');
  t.is(outcome(await post('application/json', bodies[5][1])).message, 'invalid JSON body');
  // Valid JSON of the wrong kind is named as such.
  t.is(
    outcome(await post('application/json', bodies[6][1])).message,
    'body: must be a JSON object or array, not a string',
  );
  t.is(
    outcome(await post('application/json', bodies[7][1])).message,
    'body: must be a JSON object or array, not a number',
  );
  t.is(
    outcome(await post('application/json', Buffer.from(' null'))).message,
    'body: must be a JSON object or array, not null',
  );
  t.is(outcome(await post('application/json', bodies[10][1])).status, 400);
});

test('the fast path takes plain JSON with a length within the limit, and leaves everything else to koa-body', (t) => {
  const ctx = (headers: Record<string, string>) => ({ req: { headers } }) as unknown as Context;
  t.is(plainJsonLength(ctx({ 'content-type': 'application/json', 'content-length': '17' })), 17);
  t.is(plainJsonLength(ctx({ 'content-type': 'application/json; charset=UTF-8', 'content-length': '5' })), 5);
  t.is(
    plainJsonLength(ctx({ 'content-type': 'application/json', 'content-length': '5', 'content-encoding': 'identity' })),
    5,
  );
  const others: Array<Record<string, string>> = [
    { 'content-type': 'application/json' },
    { 'content-type': 'application/json', 'content-length': '0' },
    { 'content-type': 'application/json', 'content-length': String(4 * 1024 * 1024 + 1) },
    { 'content-type': 'application/json', 'content-length': '12', 'content-encoding': 'gzip' },
    { 'content-type': 'application/json; charset=latin1', 'content-length': '12' },
    { 'content-type': 'application/vnd.api+json', 'content-length': '12' },
    { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '12' },
    { 'content-length': '12' },
  ];
  for (const headers of others) t.is(plainJsonLength(ctx(headers)), -1, JSON.stringify(headers));
});
