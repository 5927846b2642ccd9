import test from 'ava';
import { randomUUID } from 'node:crypto';
import { staticFileCount } from '../../api/staticFiles';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody } from '../helpers/tracking';

const stack = useStack(test, { realtime: 1 });

test('unknown route is 404 with {error, message}', async (t) => {
  const r = await stack().request('GET', '/v1/nope');
  t.is(r.status, 404);
  t.is(r.body.error, 'NotFound');
  t.regex(r.body.message, /GET \/v1\/nope/);
});

test('malformed JSON body is a 400, not a 500', async (t) => {
  const s = stack();
  const r = await s.request('POST', '/v1/sessions', { token: s.systemKey, rawBody: '{"userId": ' });
  t.is(r.status, 400);
  t.deepEqual(Object.keys(r.body).sort(), ['error', 'message']);
  t.is(r.body.error, 'BadRequest');
  t.regex(r.body.message, /invalid JSON/);
});

test('validation errors name the field', async (t) => {
  const s = stack();
  const r = await s.request('POST', '/v1/sessions', {
    token: s.systemKey,
    body: { userId: 'not-a-uuid', expires: 'tomorrow' },
  });
  t.is(r.status, 400);
  t.regex(r.body.message, /userId: must be a UUID/);
  t.regex(r.body.message, /expires: /);
  t.deepEqual(r.body.details.map((d: { field: string }) => d.field).sort(), ['expires', 'userId']);
});

test('wrong method on a known path is 405 with {error, message}', async (t) => {
  const r = await stack().request('PUT', '/v1/health');
  t.is(r.status, 405);
  t.is(r.body.error, 'MethodNotAllowed');
});

test('GET /v1 reports version, uptime and the parsed client', async (t) => {
  const ua =
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';
  const r = await stack().request('GET', '/v1', { headers: { 'user-agent': ua } });
  t.is(r.status, 200);
  t.is(r.body.version, require('../../../package.json').version);
  t.is(typeof r.body.server.uptime.total, 'number');
  t.is(r.body.client.userAgent, ua);
  t.is(r.body.client.browser, 'Chrome 120');
  t.is(r.body.client.os, 'Windows 10');
  t.regex(r.body.client.ip, /127\.0\.0\.1/);
  t.is(r.body._links.self, '/v1');
});

test('/health and /v1/health return the same shape with live probes and websocket counts', async (t) => {
  const s = stack();
  const [a, b] = await Promise.all([s.request('GET', '/health'), s.request('GET', '/v1/health')]);
  for (const r of [a, b]) {
    t.is(r.status, 200);
    t.is(r.body.status, 'ok');
    t.is(r.body.services.database.status, 'ok');
    t.true(r.body.services.database.responseTime > 0);
    t.is(r.body.services.cache.status, 'ok');
    t.is(r.body.services.websocket.status, 'ok');
    t.is(typeof r.body.services.websocket.connections, 'number');
    for (const k of ['days', 'hours', 'minutes', 'seconds']) t.true(Number.isInteger(r.body.uptime[k]));
  }
  t.deepEqual(Object.keys(a.body).sort(), Object.keys(b.body).sort());
  // "Same body on both" (spec §4.1): the links too, not only the keys.
  t.deepEqual(a.body._links, b.body._links);
  t.is(a.body._links.self, '/v1/health');
});

test('POST /v1/auth/validate is 501 for an authenticated caller and 401 anonymously', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const anon = await s.request('POST', '/v1/auth/validate', { body: { token: 'x' } });
  t.is(anon.status, 401);
  const r = await s.request('POST', '/v1/auth/validate', { token: user.token, body: { token: 'x' } });
  t.is(r.status, 501);
  t.is(r.body.error, 'NotImplemented'); // the spec's /v1/auth/validate placeholder
  // "Always": without a token in the body too.
  t.is((await s.request('POST', '/v1/auth/validate', { token: user.token, body: {} })).status, 501);
  t.is((await s.request('POST', '/v1/auth/validate', { token: user.token })).status, 501);
  // A form, as the document offers it, gets the 501 too.
  const form = await fetch(`${s.url}/v1/auth/validate`, {
    method: 'POST',
    headers: { authorization: `Bearer ${user.token}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'token=abc',
  });
  t.is(form.status, 501);
  const doc = await s.request('GET', '/v1/openapi.json');
  t.truthy(doc.body.paths['/v1/auth/validate'].post.requestBody.content['application/json'].schema);
  // Nor does the body's shape matter: the token is not read.
  for (const body of [{ token: 123 }, [], { token: 'a'.repeat(5000) }, { other: true }])
    t.is((await s.request('POST', '/v1/auth/validate', { token: user.token, body })).status, 501, JSON.stringify(body));
});

test('OpenAPI document lists the routes and Swagger UI is served', async (t) => {
  const s = stack();
  const doc = await s.request('GET', '/v1/openapi.json');
  t.is(doc.status, 200);
  t.is(doc.body.openapi, '3.1.0');
  t.truthy(doc.body.paths['/v1/sessions/{token}'].delete);
  t.truthy(doc.body.paths['/v1/health'].get);
  const ui = await s.request('GET', '/v1/swagger-ui/');
  t.is(ui.status, 200);
  t.regex(ui.text, /swagger-ui-bundle\.js/);
  const js = await s.request('GET', '/v1/swagger-ui/swagger-ui-bundle.js');
  t.is(js.status, 200);
});

test.serial('Swagger UI: names that are no file are 404 and not remembered (the route is public)', async (t) => {
  const s = stack();
  t.is((await s.request('GET', '/v1/swagger-ui/swagger-ui.css')).status, 200);
  const held = staticFileCount();
  for (let i = 0; i < 50; i++) {
    const r = await s.request('GET', `/v1/swagger-ui/made-up-${i}-${randomUUID()}.js`);
    t.is(r.status, 404, r.text);
  }
  t.is(staticFileCount(), held);
  // A file that exists is still read once and served.
  t.is((await s.request('GET', '/v1/swagger-ui/swagger-ui.css')).status, 200);
  t.is(staticFileCount(), held);
});

test('GraphQL SDL at /v1/schema and `me` for a user', async (t) => {
  const s = stack();
  // Uncompressed, to compare its length (the SDL is compressed for clients that accept it).
  const sdl = await s.request('GET', '/v1/schema', { headers: { 'accept-encoding': 'identity' } });
  t.is(sdl.status, 200);
  t.regex(sdl.text, /type Me/);
  t.is(sdl.headers.get('content-type'), 'text/plain; charset=utf-8');
  t.is(Number(sdl.headers.get('content-length')), Buffer.byteLength(sdl.text));
  const user = await createUser(s.db);
  const r = await s.request('POST', '/v1/gql', {
    token: user.token,
    body: { query: '{ me { userId apiKeyId roles permissions isSuperAdmin } }' },
  });
  t.is(r.status, 200, r.text);
  t.is(r.body.data.me.userId, user.id);
  t.is(r.body.data.me.apiKeyId, null);
  t.deepEqual(r.body.data.me.roles, ['User']);
  t.true(r.body.data.me.permissions.includes('two_factor:write'));
  t.false(r.body.data.me.isSuperAdmin);
  const anon = await s.request('POST', '/v1/gql', { body: { query: '{ me { userId } }' } });
  t.is(anon.body.errors[0].extensions.code, 'UNAUTHENTICATED');
});

test('a body nested too deep is a 400 naming the field, on both body parsers, and stores nothing', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const nested = (n: number) => '['.repeat(n) + ']'.repeat(n);
  // Counted by this test's name: other tests of the file create geofences at the same time.
  const geofences = async () => Number((await s.db('geofences').where('name', 'deep').count({ n: '*' }).first())!.n);
  const before = await geofences();
  // Free-form JSON fields were cloned and serialised recursively: thousands of levels overflowed the stack (500).
  const deep = `{"name":"deep","latitude":1,"longitude":1,"radius_km":1,"metadata":{"a":${nested(2000)}}}`;
  const r = await s.request('POST', '/v1/geofences', { token: admin.token, rawBody: deep });
  t.is(r.status, 400, r.text);
  t.is(r.body.error, 'BadRequest');
  t.regex(r.body.message, /^metadata\.a\.0\.0: nested deeper than 64 levels/);
  // The same through koa-body (a +json media type is not the fast path's plain application/json).
  const viaKoaBody = await s.request('PUT', '/v1/settings/deep', {
    token: admin.token,
    rawBody: `{"value":${nested(5000)}}`,
    headers: { 'content-type': 'application/vnd.api+json' },
  });
  t.is(viaKoaBody.status, 400, viaKoaBody.text);
  t.regex(viaKoaBody.body.message, /^value\.0\.0\.0: nested deeper than 64 levels/);
  t.is(await geofences(), before);
  // Within the limit the same field is stored as sent.
  const ok = `{"name":"fine","latitude":1,"longitude":1,"radius_km":1,"metadata":{"a":${nested(60)}}}`;
  const created = await s.request('POST', '/v1/geofences', { token: admin.token, rawBody: ok });
  t.is(created.status, 201, created.text);
  t.is(JSON.stringify(created.body.data.metadata), `{"a":${nested(60)}}`);
});

test('a number beyond a double (1e400) is a 400 naming the field, in free-form JSON too', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  // JSON.parse reads 1e400 as Infinity, which a jsonb column stores as null: the value would change.
  const body = (metadata: string) => `{"name":"huge","latitude":1,"longitude":1,"radius_km":1,"metadata":${metadata}}`;
  for (const [metadata, field] of [
    ['{"k":1e400}', 'metadata.k'],
    ['{"list":[1,-1e400]}', 'metadata.list.1'],
  ]) {
    const r = await s.request('POST', '/v1/geofences', { token: admin.token, rawBody: body(metadata) });
    t.is(r.status, 400, r.text);
    t.is(r.body.error, 'BadRequest');
    t.is(r.body.message, `${field}: number too large (beyond ±1.8e308)`);
    // As every other validation 400: details names the field.
    t.deepEqual(r.body.details, [{ field, message: 'number too large (beyond ±1.8e308)' }]);
  }
  // Through koa-body too.
  const viaKoaBody = await s.request('PUT', '/v1/settings/huge', {
    token: admin.token,
    rawBody: '{"value":{"n":1e999}}',
    headers: { 'content-type': 'application/vnd.api+json' },
  });
  t.is(viaKoaBody.status, 400, viaKoaBody.text);
  t.regex(viaKoaBody.body.message, /^value\.n: number too large/);
  t.falsy(await s.db('geofences').where('name', 'huge').first());
  // The largest double and the smallest are kept as sent.
  const ok = await s.request('POST', '/v1/geofences', {
    token: admin.token,
    rawBody: body('{"max":1.7976931348623157e308,"tiny":5e-324}'),
  });
  t.is(ok.status, 201, ok.text);
  t.deepEqual(ok.body.data.metadata, { max: 1.7976931348623157e308, tiny: 5e-324 });
});

test('a body of a type the parsers do not read is a 415 naming the type, not a missing-field 400', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const body = '{"name":"typed","latitude":1,"longitude":1,"radius_km":1}';
  // fetch sends a string body as text/plain unless told otherwise.
  const text = await s.request('POST', '/v1/geofences', {
    token: admin.token,
    rawBody: body,
    headers: { 'content-type': 'text/plain;charset=UTF-8' },
  });
  t.is(text.status, 415, text.text);
  t.is(text.body.error, 'UnsupportedMediaType');
  t.regex(
    text.body.message,
    /Content-Type 'text\/plain;charset=UTF-8' is not accepted: send the body as application\/json/,
  );
  // Geofences take no form (a radius is a number): the hint must not send the client to one unqualified.
  t.notRegex(text.body.message, /\(or a form/);
  t.regex(text.body.message, /a route whose fields are all text also takes a form/);
  const xml = await s.request('PATCH', '/v1/users/me', {
    token: admin.token,
    rawBody: '<user/>',
    headers: { 'content-type': 'application/xml' },
  });
  t.is(xml.status, 415, xml.text);
  // The same body as JSON (plain, and a +json type koa-body parses) is taken.
  const json = await s.request('POST', '/v1/geofences', { token: admin.token, rawBody: body });
  t.is(json.status, 201, json.text);
  const vnd = await s.request('POST', '/v1/geofences', {
    token: admin.token,
    rawBody: body,
    headers: { 'content-type': 'application/vnd.api+json' },
  });
  t.is(vnd.status, 201, vnd.text);
  t.is(Number((await s.db('geofences').where('name', 'typed').count({ n: '*' }).first())!.n), 2);
});

test('every 201 says where the new resource is: Location is its _links.self (none for a GPS batch)', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const creates: Array<[string, Record<string, unknown>]> = [
    ['/v1/devices', { name: 'Location header boat' }],
    ['/v1/trips', { name: 'Location header trip' }],
    ['/v1/roles', { name: `location_header_${Date.now().toString(36)}` }],
    ['/v1/trip-categories', { name: `Location header ${Date.now().toString(36)}` }],
    ['/v1/geofences', { name: 'Location header fence', latitude: 52, longitude: 13, radius_km: 1 }],
  ];
  for (const [path, body] of creates) {
    const r = await s.request('POST', path, { token: admin.token, body });
    t.is(r.status, 201, `${path}: ${r.text}`);
    t.truthy(r.body._links?.self, path);
    t.is(r.headers.get('location'), r.body._links.self, path);
    t.is((await s.request('GET', r.headers.get('location')!, { token: admin.token })).status, 200, path);
  }
  const point = { ...gpsBody(), latitude: 52, longitude: 13 };
  const one = await s.request('POST', '/v1/gps', { token: admin.token, body: point });
  t.is(one.status, 201, one.text);
  t.is(one.headers.get('location'), `/v1/gps/${one.body.data.id}`);
  const batch = await s.request('POST', '/v1/gps/batch', { token: admin.token, body: { points: [point] } });
  t.is(batch.status, 201, batch.text);
  t.is(batch.headers.get('location'), null, 'a batch is no resource of its own');
  // A session's path holds its token: the body has it, no header does.
  const session = await s.request('POST', '/v1/sessions', {
    token: s.systemKey,
    body: { userId: admin.id, expires: new Date(Date.now() + 3_600_000).toISOString() },
  });
  t.is(session.status, 201, session.text);
  t.regex(session.body._links.self, /^\/v1\/sessions\//);
  t.is(session.headers.get('location'), null);
});
