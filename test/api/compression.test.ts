import test from 'ava';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { compressionCount, preferredEncoding } from '../../api/compression';
import { createUser, insertTrackPoints } from '../helpers/factories';
import { rawRequest } from '../helpers/rawHttp';
import { useStack } from '../helpers/stack';

/**
 * README "Hot paths", compression: bytes made once (cached lists, documents, static files) are
 * compressed once per encoding and answered as they are; bodies made per request are compressed
 * per request from 16 KB up; the client's Accept-Encoding decides, and identity stays available.
 */
const stack = useStack(test);

const gunzip = promisify(zlib.gunzip);
const unbrotli = promisify(zlib.brotliDecompress);

/** GET `path` with exactly this Accept-Encoding (fetch would add and undo its own), as raw bytes. */
async function get(path: string, acceptEncoding?: string, extra = '') {
  const head =
    `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n` +
    (acceptEncoding !== undefined ? `Accept-Encoding: ${acceptEncoding}\r\n` : '') +
    extra +
    '\r\n';
  const r = await rawRequest(stack().api.port, head);
  const raw = Buffer.from(r.raw, 'latin1');
  const body = raw.subarray(raw.indexOf('\r\n\r\n') + 4);
  return { status: r.status, headers: r.headers, body };
}

async function decoded(r: { headers: Record<string, string>; body: Buffer }): Promise<Buffer> {
  const enc = r.headers['content-encoding'];
  if (enc === 'br') return unbrotli(r.body);
  if (enc === 'gzip') return gunzip(r.body);
  return r.body;
}

for (const path of ['/v1/openapi.json', '/v1/schema'])
  test.serial(
    `a document made once is compressed once per encoding, and decodes to the same bytes: ${path}`,
    async (t) => {
      const plain = await get(path);
      t.is(plain.status, 200);
      t.false('content-encoding' in plain.headers);
      t.regex(plain.headers.vary ?? '', /Accept-Encoding/i);
      t.is(Number(plain.headers['content-length']), plain.body.length);
      t.regex(plain.body.toString('utf8'), path === '/v1/schema' ? /type Query/ : /"openapi":/);

      const before = compressionCount();
      for (const [accept, expected] of [
        ['br', 'br'],
        ['gzip', 'gzip'],
        ['gzip, deflate, br', 'br'],
        ['br;q=0.5, gzip', 'gzip'],
        ['br', 'br'],
        ['gzip', 'gzip'],
      ] as const) {
        const r = await get(path, accept);
        t.is(r.headers['content-encoding'], expected, accept);
        t.regex(r.headers.vary ?? '', /Accept-Encoding/i);
        t.is(Number(r.headers['content-length']), r.body.length);
        t.true(r.body.length * 2 < plain.body.length, `${accept}: ${r.body.length} of ${plain.body.length} bytes`);
        t.true((await decoded(r)).equals(plain.body), accept);
        // The strong ETag of the bytes is weak on the compressed answer, and still validates.
        t.is(r.headers.etag, `W/${plain.headers.etag}`);
      }
      // Two encodings, each made once, however many answers.
      t.is(compressionCount() - before, 2);

      const notModified = await get(path, 'br', `If-None-Match: W/${plain.headers.etag}\r\n`);
      t.is(notModified.status, 304);
      t.is(notModified.body.length, 0);

      // Refused codings and identity-only clients get the bytes as they are.
      for (const accept of ['identity', 'gzip;q=0, br;q=0', 'deflate', '']) {
        const r = await get(path, accept);
        t.false('content-encoding' in r.headers, accept);
        t.true(r.body.equals(plain.body), accept);
      }
    },
  );

test.serial('a cached list is compressed once per version; a write makes new bytes', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  await s.db('roles').insert(
    Array.from({ length: 40 }, (_, i) => ({
      id: `zip_role_${i}`,
      name: `Zip role ${i}`,
      description: 'x'.repeat(40),
    })),
  );
  const auth = `Authorization: Bearer ${admin.token}\r\n`;
  const first = await get('/v1/roles', 'br', auth);
  t.is(first.status, 200);
  t.is(first.headers['content-encoding'], 'br');
  const before = compressionCount();
  const again = await get('/v1/roles', 'br', auth);
  t.true(again.body.equals(first.body));
  t.is(compressionCount(), before);
  const names = (b: Buffer) =>
    (JSON.parse(b.toString('utf8')) as { data: Array<{ name: string }> }).data.map((r) => r.name);
  t.true(names(await decoded(first)).includes('Zip role 7'));

  await s.db('roles').insert({ id: 'zip_role_new', name: 'Zip role new', description: 'y' });
  const after = await get('/v1/roles', 'br', auth);
  t.true(names(await decoded(after)).includes('Zip role new'));
  t.is(compressionCount(), before + 1);
});

test.serial('a body made per request is compressed from 16 KB up, and small ones are left alone', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  await insertTrackPoints(s.db, 100, { device_id: 'zip-device' });
  const auth = `Authorization: Bearer ${admin.token}\r\n`;
  const plain = await get('/v1/gps?device_id=zip-device&limit=100', undefined, auth);
  t.is(plain.status, 200);
  t.true(plain.body.length >= 16 * 1024, `${plain.body.length} bytes`);
  t.is(plain.headers['content-type'], 'application/json; charset=utf-8');
  const before = compressionCount();
  const zipped = await get('/v1/gps?device_id=zip-device&limit=100', 'gzip', auth);
  t.is(zipped.headers['content-encoding'], 'gzip');
  t.is(zipped.headers['content-type'], 'application/json; charset=utf-8');
  const body = JSON.parse((await decoded(zipped)).toString('utf8')) as {
    data: unknown[];
    pagination: { total: number };
  };
  t.is(body.data.length, 100);
  t.is(body.pagination.total, 100);
  t.deepEqual(body, JSON.parse(plain.body.toString('utf8')));
  t.is(compressionCount(), before + 1);

  const small = await get('/v1/gps?device_id=zip-device&limit=2', 'gzip, br', auth);
  t.is(small.status, 200);
  t.false('content-encoding' in small.headers);
  t.is((JSON.parse(small.body.toString('utf8')) as { data: unknown[] }).data.length, 2);
  t.is(compressionCount(), before + 1);
});

test.serial('a GPX track is compressed (application/gpx+xml is text)', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const [trip] = await s.db('trips').insert({ name: 'zip trip' }).returning('id');
  await insertTrackPoints(s.db, 100, { device_id: 'zip-gpx', trip_id: trip.id });
  const r = await get(`/v1/trips/${trip.id}/gpx`, 'gzip', `Authorization: Bearer ${admin.token}\r\n`);
  t.is(r.status, 200);
  t.is(r.headers['content-type'], 'application/gpx+xml');
  t.is(r.headers['content-encoding'], 'gzip');
  const text = (await decoded(r)).toString('utf8');
  t.true(text.length >= 16 * 1024);
  t.is(text.match(/<trkpt /g)?.length, 100);
});

test('Accept-Encoding is read as RFC 9110 says: q-values, refusals and *', (t) => {
  t.is(preferredEncoding(undefined), undefined);
  t.is(preferredEncoding(''), undefined);
  t.is(preferredEncoding('gzip'), 'gzip');
  t.is(preferredEncoding('gzip, br'), 'br');
  t.is(preferredEncoding('br;q=0.1, gzip;q=0.9'), 'gzip');
  t.is(preferredEncoding('BR'), 'br');
  t.is(preferredEncoding('gzip;q=0'), undefined);
  t.is(preferredEncoding('*'), 'br');
  t.is(preferredEncoding('br;q=0, *'), 'gzip');
  t.is(preferredEncoding('br;q=0, gzip;q=0, *'), undefined);
  t.is(preferredEncoding('identity, deflate'), undefined);
  // Values read before are remembered: the same answers a second time.
  t.is(preferredEncoding('br;q=0.1, gzip;q=0.9'), 'gzip');
  t.is(preferredEncoding('br;q=0, gzip;q=0, *'), undefined);
  t.is(preferredEncoding('*'), 'br');
});
