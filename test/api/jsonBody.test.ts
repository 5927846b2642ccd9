import test from 'ava';
import type { Context } from 'koa';
import { plainJsonLength } from '../../api/middleware/body';
import { MAX_JSON_VALUES } from '../../shared/jsonLimits';
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
  // The parser's own words say what is wrong and where.
  t.regex(String(outcome(await post('application/json', bodies[5][1])).message), /^invalid JSON body: .*end of JSON/);
  t.regex(String(outcome(await post('application/json', bodies[11][1])).message), /^invalid JSON body: .*position 16/);
  t.is(outcome(await post('application/json', bodies[10][1])).message, 'body: the key __proto__ is not allowed');
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

/** POST /v1/devices with these body bytes and extra header lines, on its own connection. */
function postWith(headers: string, body: Buffer) {
  const head =
    `POST /v1/devices HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${admin.token}\r\n` +
    `${headers}Content-Length: ${body.length}\r\n\r\n`;
  return rawRequest(stack().api.port, Buffer.concat([Buffer.from(head), body]));
}

test('a compressed JSON body is read as UTF-8 too: what is not is refused, never stored as U+FFFD', async (t) => {
  admin ??= await createUser(stack().db, { roles: ['role_admin'] });
  const zlib = await import('node:zlib');
  const encoders: Record<string, (b: Buffer) => Buffer> = {
    gzip: zlib.gzipSync,
    deflate: zlib.deflateSync,
    br: zlib.brotliCompressSync,
  };
  const json = 'Content-Type: application/json\r\n';
  for (const [encoding, encode] of Object.entries(encoders)) {
    const ok = await postWith(`${json}Content-Encoding: ${encoding}\r\n`, encode(Buffer.from('{"name":"Bööt 🚤"}')));
    t.is(ok.status, 201, `${encoding}: ${ok.raw}`);
    t.is(ok.body.data.name, 'Bööt 🚤');
    const latin1 = Buffer.concat([Buffer.from('{"name":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]);
    const bad = await postWith(`${json}Content-Encoding: ${encoding}\r\n`, encode(latin1));
    t.is(bad.status, 400, `${encoding}: ${bad.raw}`);
    t.regex(bad.body.message, /not valid UTF-8/);
    const garbage = await postWith(`${json}Content-Encoding: ${encoding}\r\n`, Buffer.from('not compressed at all'));
    t.is(garbage.status, 400, `${encoding}: ${garbage.raw}`);
    t.regex(garbage.body.message, new RegExp(`not valid ${encoding} data`));
  }
  // The limit counts decompressed bytes: 5 MB of spaces compress to a few KB.
  const bomb = zlib.gzipSync(
    Buffer.concat([Buffer.from('{"name":"x"'), Buffer.alloc(5 * 1024 * 1024, 0x20), Buffer.from('}')]),
  );
  const big = await postWith(`${json}Content-Encoding: gzip\r\n`, bomb);
  t.is(big.status, 413, big.raw);
  const unknown = await postWith(`${json}Content-Encoding: compress\r\n`, Buffer.from('{}'));
  t.is(unknown.status, 415, unknown.raw);
  // An empty Content-Encoding is none; a compressed body of nothing is an empty body ({}), whose
  // missing name the route names.
  const empty = await postWith(`${json}Content-Encoding: \r\n`, Buffer.from('{"name":"plain"}'));
  t.is(empty.status, 201, empty.raw);
  const nothing = await postWith(`${json}Content-Encoding: gzip\r\n`, zlib.gzipSync(Buffer.alloc(0)));
  t.is(nothing.status, 400, nothing.raw);
  t.regex(nothing.body.message, /name/);
  // A broken stream refused before its end closes the connection: the next request on it would
  // otherwise wait behind the unread bytes.
  const noise = Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, 0x00]), Buffer.alloc(200_000, 0x41)]);
  const broken = await rawRequest(
    stack().api.port,
    Buffer.concat([
      Buffer.from(
        `POST /v1/devices HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin.token}\r\n${json}` +
          `Content-Encoding: gzip\r\nContent-Length: ${noise.length}\r\n\r\n`,
      ),
      noise,
    ]),
  );
  t.is(broken.status, 400, broken.raw.slice(0, 300));
  t.is(broken.headers.connection, 'close');
  t.is(await stack().db('devices').where('name', 'like', 'caf%').first(), undefined);
});

test('a form body is read as UTF-8: bytes or percent-escapes that are not UTF-8 are refused', async (t) => {
  admin ??= await createUser(stack().db, { roles: ['role_admin'] });
  const form = 'Content-Type: application/x-www-form-urlencoded\r\n';
  const named = async (body: Buffer) => {
    const r = await postWith(form, body);
    t.is(r.status, 201, r.raw);
    return r.body.data.name as string;
  };
  t.is(await named(Buffer.from('name=Bo%C3%B6t+%F0%9F%9A%A4')), 'Boöt 🚤');
  t.is(await named(Buffer.from('name=Böot raw')), 'Böot raw');
  t.is(await named(Buffer.from('name=100%25 sure')), '100% sure');
  // A % that escapes nothing stays as it is (as qs leaves it).
  t.is(await named(Buffer.from('name=50% off')), '50% off');
  for (const body of [
    Buffer.concat([Buffer.from('name=caf'), Buffer.from([0xe9])]),
    Buffer.from('name=caf%E9'),
    Buffer.from('na%FFme=boat'),
  ]) {
    const r = await postWith(form, body);
    t.is(r.status, 400, `${body.toString('latin1')}: ${r.raw}`);
    t.regex(r.body.message, /form field is not valid UTF-8/);
  }
  t.is(await stack().db('devices').where('name', 'like', 'caf%').first(), undefined);
});

test('a JSON body of more than MAX_JSON_VALUES values is a 413 before it is parsed; the largest GPS batch passes', async (t) => {
  const s = stack();
  // The audit's body: 60,000 arrays nested 30 deep (3.6 MB, within the size and depth limits), on
  // an anonymous route. Parsing it held the event loop ~1.2 s, and the route then answered 202.
  const nested = Array(60_000)
    .fill(`${'['.repeat(30)}${']'.repeat(30)}`)
    .join(',');
  const anon = await s.request('POST', '/v1/auth/reset-password/request', {
    rawBody: `{"email":"zz@example.com","n":[${nested}]}`,
    headers: { 'content-type': 'application/json' },
  });
  t.is(anon.status, 413, anon.text.slice(0, 300));
  t.is(anon.body.error, 'PayloadTooLarge');
  t.is(anon.body.message, `body: too many JSON values (at most ${MAX_JSON_VALUES} arrays, objects and items)`);
  // GraphQL's body is read by the same parser: its 413 in GraphQL's format.
  const gql = await s.request('POST', '/v1/gql', {
    rawBody: `{"query":"{ __typename }","variables":{"n":[${nested}]}}`,
    headers: { 'content-type': 'application/json' },
  });
  t.is(gql.status, 413, gql.text.slice(0, 300));
  t.is(gql.body.errors[0].extensions.code, 'PAYLOAD_TOO_LARGE');
  t.regex(gql.body.errors[0].message, /^body: too many JSON values/);
  // What is inside strings is not counted: brackets, commas, escaped quotes and backslashes.
  const text = '[{,\\"\\\\'.repeat(40_000);
  const inString = await s.request('POST', '/v1/auth/reset-password/request', {
    rawBody: JSON.stringify({ email: 'zz@example.com', note: JSON.parse(`"${text}"`) }),
    headers: { 'content-type': 'application/json' },
  });
  t.is(inString.status, 202, inString.text.slice(0, 300));
  // The largest body a route takes: 1,000 GPS points with every field (15,001 values).
  const developer = await createUser(s.db, { roles: ['role_developer'] });
  const now = Math.floor(Date.now() / 1000);
  const points = Array.from({ length: 1000 }, (_, i) => ({
    latitude: 52.52,
    longitude: 13.405,
    altitude: 34.5,
    heading: 90,
    timestamp: now - 1000 + i,
    speed_kmh: 36,
    speed_mps: 10,
    speed_mph: 22.37,
    speed_knots: 19.44,
    pdop: 1.2,
    hdop: 0.9,
    vdop: 1.1,
    device_id: 'max-batch-boat',
    trip_id: null,
  }));
  const batch = await s.request('POST', '/v1/gps/batch', { token: developer.token, body: { points } });
  t.is(batch.status, 201, batch.text.slice(0, 300));
  t.is(batch.body.data.accepted.length, 1000);
});
