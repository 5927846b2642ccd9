import test from 'ava';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { systemKeyAllowed } from '../../shared/policies';
import { createKey, createUser, TestUser } from '../helpers/factories';
import { responseChecker, ResponseChecker } from '../helpers/openapiCheck';
import { HttpResult, useStack } from '../helpers/stack';
import { withResponsesInline } from '../../api/openapiSpec';

/**
 * The error answers of the OpenAPI document against the running service (audit "openapi"
 * F1–F6, F8–F14): every status a route answers is documented, with a body that matches its
 * documented schema and has no undocumented fields. The anonymous tier is lifted (the tests below
 * call every route several times); POST /v1/gps takes 3 requests per window, so one caller reaches 429.
 */
const stack = useStack(test, { env: { RATE_LIMIT_ANONYMOUS: '100000', RATE_LIMIT_GPS_POST: '3' } });

type Schema = Record<string, any>;
type Operation = Schema & { responses: Record<string, Schema> };
type Doc = {
  info: { description: string };
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema>; securitySchemes: Record<string, Schema> };
};

let doc: Doc;
let checker: ResponseChecker;
let admin: TestUser;

// After the stack's own before hook (hooks run concurrently): every test awaits this first.
let setup: Promise<void> | undefined;
const ready = () =>
  (setup ??= (async () => {
    const s = stack();
    // Each operation's answers as they read, the shared ones (components/responses) inlined.
    doc = withResponsesInline((await s.request<Doc>('GET', '/v1/openapi.json')).body);
    checker = responseChecker(doc as never);
    admin = await createUser(s.db, { roles: ['role_admin'] });
  })());
test.beforeEach(() => ready());

/** Every operation as [method, OpenAPI path, operation]. */
const operations = () =>
  Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => [method, path, op] as const),
  );
/** GET operations without path parameters: they can be called as they are. */
const plainGets = () => operations().filter(([method, path]) => method === 'get' && !path.includes('{'));

const resolve = (s: Schema): Schema => (s.$ref ? doc.components.schemas[String(s.$ref).split('/').pop()!] : s);
/** The properties a schema declares (through $ref and allOf). */
function declared(s: Schema): Set<string> {
  const r = resolve(s);
  const out = new Set<string>(Object.keys(r.properties ?? {}));
  for (const part of r.allOf ?? []) for (const k of declared(part)) out.add(k);
  return out;
}

/**
 * Why an answer departs from the document, or null: its status must be documented, a JSON body
 * must match the documented schema and carry no top-level field the schema does not declare.
 */
function problem(method: string, path: string, r: HttpResult): string | null {
  const found = checker.operationOf(method, path);
  if (!found) return `${method} ${path}: not documented`;
  const response = found.op.responses?.[String(r.status)];
  if (!response) return `${method} ${found.template}: status ${r.status} not documented (${r.text.slice(0, 120)})`;
  if (!/json/.test(r.headers.get('content-type') ?? '')) return null;
  const mismatch = checker.check(method, path, r.status, r.body);
  if (mismatch) return mismatch;
  const schema = response.content?.['application/json']?.schema as Schema | undefined;
  if (schema && r.body && typeof r.body === 'object' && !Array.isArray(r.body)) {
    const names = declared(schema);
    const extra = Object.keys(r.body as object).filter((k) => !names.has(k));
    if (names.size && extra.length) return `${method} ${found.template} ${r.status}: undocumented ${extra.join(', ')}`;
  }
  return null;
}

const problems = (list: Array<string | null>) => list.filter((p): p is string => p !== null);

test('F1a/F6: a bad bearer token gets 401 on every route, public ones included, as documented', async (t) => {
  const s = stack();
  const seen: Array<string | null> = [];
  for (const [, path] of plainGets()) {
    const r = await s.request('GET', path, { headers: { authorization: 'Bearer garbage' } });
    seen.push(r.status === 401 ? problem('GET', path, r) : `GET ${path}: ${r.status}, not 401`);
  }
  const gql = await s.request('POST', '/v1/gql', {
    headers: { authorization: 'Bearer garbage' },
    body: { query: '{ platforms { slug } }' },
  });
  t.is(gql.status, 401);
  t.is(gql.body.errors[0].extensions.code, 'UNAUTHENTICATED');
  seen.push(problem('POST', '/v1/gql', gql));
  t.deepEqual(problems(seen), []);
  t.true(plainGets().length > 40);
});

test("F1c: a banned account's credential gets 403 on every route, as documented", async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  // A ban ends the user's sessions; a key of theirs is refused as banned.
  const { key } = await createKey({ userId: user.id, scopes: ['users:read'] });
  t.is(
    (await s.request('POST', `/v1/users/${user.id}/ban`, { token: admin.token, body: { reason: 'x' } })).status,
    201,
  );
  const seen: Array<string | null> = [];
  for (const [, path] of plainGets()) {
    const r = await s.request('GET', path, { token: key });
    seen.push(r.status === 403 ? problem('GET', path, r) : `GET ${path}: ${r.status}, not 403`);
  }
  t.deepEqual(problems(seen), []);
});

test('F1b: the system key gets 403 on every route outside its allowlist, as documented', async (t) => {
  const s = stack();
  const seen: Array<string | null> = [];
  for (const [, path] of plainGets().filter(([, p]) => !systemKeyAllowed(p))) {
    const r = await s.request('GET', path, { token: s.systemKey });
    seen.push(r.status === 403 ? problem('GET', path, r) : `GET ${path}: ${r.status}, not 403`);
  }
  t.deepEqual(problems(seen), []);
});

test('F1d/F8a: a NUL in the query is a 400 exactly where documented, with `details` declared', async (t) => {
  const s = stack();
  const seen: Array<string | null> = [];
  for (const [, path, op] of plainGets()) {
    const r = await s.request('GET', `${path}?x=%00`, { token: admin.token });
    if (r.status === 400) seen.push(problem('GET', path, r));
    else if (op.responses['400']) seen.push(`GET ${path}: documents 400 but answered ${r.status}`);
  }
  t.deepEqual(problems(seen), []);
  const r = await s.request('GET', '/v1/roles?x=%00', { token: admin.token });
  t.is(r.status, 400);
  t.deepEqual(r.body.details, [{ field: 'x', message: 'must not contain NUL characters' }]);
  const error = doc.components.schemas.Error;
  t.deepEqual(Object.keys(error.properties).sort(), ['details', 'error', 'error_description', 'message']);
  t.deepEqual(error.required, ['error', 'message']);
});

test('F1d/F1e: bodies: malformed JSON 400, other types 415, too large 413, on every body method', async (t) => {
  const s = stack();
  const missing = operations()
    .filter(([method]) => ['post', 'put', 'patch', 'delete'].includes(method))
    .flatMap(([method, path, op]) =>
      // The token endpoint answers a body of another type with 400 invalid_request (RFC 6749 §5.2).
      (path === '/v1/oauth/token' ? ['400', '413'] : ['400', '413', '415'])
        .filter((st) => !op.responses[st])
        .map((st) => `${method} ${path}: no ${st}`),
    );
  t.deepEqual(missing, []);
  const seen: Array<string | null> = [];
  for (const path of ['/v1/ws/ticket', '/v1/admin/queues/session', '/v1/users/me/cancel-deletion']) {
    const r = await s.request('POST', path, { token: admin.token, rawBody: '{bad' });
    seen.push(r.status === 400 ? problem('POST', path, r) : `POST ${path}: ${r.status}, not 400`);
  }
  const text = await s.request('POST', '/v1/devices', {
    token: admin.token,
    rawBody: 'name=x',
    headers: { 'content-type': 'text/plain' },
  });
  seen.push(text.status === 415 ? problem('POST', '/v1/devices', text) : `415 expected, got ${text.status}`);
  const big = await s.request('POST', '/v1/devices', {
    token: admin.token,
    rawBody: JSON.stringify({ name: 'x', description: 'y'.repeat(5 * 1024 * 1024) }),
  });
  seen.push(big.status === 413 ? problem('POST', '/v1/devices', big) : `413 expected, got ${big.status}`);
  t.deepEqual(problems(seen), []);
});

// Serial: other tests here create API keys, and a list that changes between the two requests
// rightly answers 200 with a new ETag (seen once for GET /v1/api-keys).
test.serial('F1e: an answer with an ETag documents 304, and If-None-Match gets it', async (t) => {
  const s = stack();
  const seen: string[] = [];
  let conditional = 0;
  // Not the data export: a fresh archive each time, never conditional.
  for (const [, path, op] of plainGets().filter(([, p]) => p !== '/v1/user/export')) {
    const r = await s.request('GET', path, { token: admin.token });
    const etag = r.headers.get('etag');
    if (r.status !== 200) continue;
    if (!etag) {
      if (op.responses['304']) seen.push(`GET ${path}: documents 304 but sends no ETag`);
      continue;
    }
    conditional++;
    if (!op.responses['304']) seen.push(`GET ${path}: sends an ETag but documents no 304`);
    if (!op.responses['200'].headers?.ETag) seen.push(`GET ${path}: ETag header not documented`);
    // fetch adds `Cache-Control: no-cache` to a conditional request unless one is given.
    const again = await s.request('GET', path, {
      token: admin.token,
      headers: { 'if-none-match': etag, 'cache-control': 'max-age=0' },
    });
    if (again.status !== 304) seen.push(`GET ${path}: If-None-Match answered ${again.status}`);
  }
  t.deepEqual(seen, []);
  t.true(conditional >= 10, `${conditional} conditional answers`);
});

test('F14: 429 is documented exactly where the rate limiter counts, with its headers', async (t) => {
  const s = stack();
  const seen: string[] = [];
  for (const [, path, op] of plainGets()) {
    let r = await s.request('GET', path);
    // The limiter fails open (no headers) when Redis does not answer within its timeout, which a
    // heavily loaded machine can make it miss once: asked again before concluding.
    if (r.headers.get('x-ratelimit-limit') === null && op.responses['429']) r = await s.request('GET', path);
    const limited = r.headers.get('x-ratelimit-limit') !== null;
    if (limited !== Boolean(op.responses['429']))
      seen.push(
        `GET ${path}: rate-limit headers ${limited ? 'sent' : 'absent'}, 429 ${limited ? 'not ' : ''}documented`,
      );
  }
  t.deepEqual(seen, []);
  for (const [method, path, op] of operations()) {
    const headers = op.responses['429']?.headers;
    if (headers)
      t.deepEqual(
        Object.keys(headers).sort(),
        ['Retry-After', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'],
        `${method} ${path}`,
      );
    t.truthy(op.responses['503']?.headers?.['Retry-After'], `${method} ${path}: 503 with Retry-After`);
    t.truthy(op.responses['500'], `${method} ${path}: 500`);
  }
  // POST /v1/gps takes 3 requests per window here: the fourth is refused with every header.
  const user = await createUser(s.db);
  let r: HttpResult | undefined;
  for (let i = 0; i < 4; i++) r = await s.request('POST', '/v1/gps', { token: user.token, body: {} });
  t.is(r!.status, 429);
  for (const h of ['retry-after', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'])
    t.truthy(r!.headers.get(h), h);
  t.is(problem('POST', '/v1/gps', r!), null);
});

test('the rate-limit headers are what the document says: X-RateLimit-Reset a Unix timestamp, Retry-After seconds', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  let r: HttpResult | undefined;
  for (let i = 0; i < 4; i++) r = await s.request('POST', '/v1/gps', { token: user.token, body: {} });
  t.is(r!.status, 429);
  const now = Date.now() / 1000;
  const reset = Number(r!.headers.get('x-ratelimit-reset'));
  const retryAfter = Number(r!.headers.get('retry-after'));
  // The window's end as seconds since the epoch, Retry-After seconds from now (spec §8).
  t.true(reset > now && reset <= now + retryAfter + 2, `X-RateLimit-Reset ${reset} at ${now}`);
  t.true(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  const headers = doc.paths['/v1/gps'].post.responses['429'].headers;
  t.regex(headers['X-RateLimit-Reset'].description, /Unix timestamp/);
  t.notRegex(headers['X-RateLimit-Reset'].description, /^Seconds/);
  t.regex(headers['Retry-After'].description, /^Seconds/);
});

test('GraphQL errors carry only what GraphQLResult declares: message, locations, path, extensions {code, status}', async (t) => {
  const s = stack();
  const query = (q: string, headers?: Record<string, string>) =>
    s.request('POST', '/v1/gql', { body: { query: q }, headers });
  const answers = [
    await query('{ nope }'), // validation: locations
    await query('{ roles { name } }'), // a field refused (anonymous): locations and path
    await query('{ me { isSuperAdmin } }', { authorization: 'Bearer nope' }), // refused before GraphQL: 401
  ];
  const item = resolve(doc.components.schemas.GraphQLResult).properties.errors.items;
  const fields = new Set<string>();
  for (const r of answers) {
    t.is(problem('POST', '/v1/gql', r), null);
    for (const e of r.body.errors) {
      for (const k of Object.keys(e)) fields.add(k);
      for (const k of Object.keys(e).filter((k) => !item.properties[k]))
        t.fail(`undeclared ${k}: ${JSON.stringify(e)}`);
    }
  }
  t.deepEqual([...fields].sort(), ['extensions', 'locations', 'message', 'path']);
  t.deepEqual(item.required.sort(), ['extensions', 'message']);
  t.deepEqual(item.properties.extensions.required.sort(), ['code', 'status']);
  t.deepEqual(
    answers.map((r) => [r.status, r.body.errors[0].extensions.code]),
    [
      [200, 'GRAPHQL_VALIDATION_FAILED'],
      [200, 'UNAUTHENTICATED'],
      [401, 'UNAUTHENTICATED'],
    ],
  );
});

test('F2: the two-factor routes document the 403 they answer without two_factor:*', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const calls: Array<[string, string, unknown]> = [
    ['GET', '/v1/users/me/2fa/status', undefined],
    ['GET', '/v1/users/me/2fa/requirement', undefined],
    ['POST', '/v1/users/me/2fa/setup', {}],
    ['POST', '/v1/users/me/2fa/verify', { code: '123456' }],
    ['DELETE', '/v1/users/me/2fa', { code: '123456' }],
    ['POST', '/v1/users/me/2fa/backup-codes/regenerate', { code: '123456' }],
  ];
  const seen: Array<string | null> = [];
  for (const [method, path, body] of calls) {
    const { key } = await createKey({ userId: user.id, scopes: ['gps:read'] });
    const r = await s.request(method, path, { token: key, body });
    seen.push(r.status === 403 ? problem(method, path, r) : `${method} ${path}: ${r.status}, not 403`);
    t.regex(doc.paths[path][method.toLowerCase()].responses['403'].description, /two_factor:/);
  }
  t.deepEqual(problems(seen), []);
});

test('F3/F8c: DELETE /v1/users/me/sessions/{id}: both 400 answers match the document', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const bad = await s.request('DELETE', '/v1/users/me/sessions/notauuid', { token: user.token });
  t.is(bad.status, 400);
  t.is(problem('DELETE', '/v1/users/me/sessions/notauuid', bad), null);
  const current = await s.request('DELETE', `/v1/users/me/sessions/${user.sessionId}`, { token: user.token });
  t.is(current.status, 400);
  t.is(current.body.success, false);
  t.is(problem('DELETE', `/v1/users/me/sessions/${user.sessionId}`, current), null);
});

test('F8: a GPS batch with no valid point answers 400 with `rejected`, as documented', async (t) => {
  const s = stack();
  const r = await s.request('POST', '/v1/gps/batch', { token: admin.token, body: { points: [{ latitude: 'x' }] } });
  t.is(r.status, 400, r.text);
  t.is(r.body.rejected[0].index, 0);
  t.is(problem('POST', '/v1/gps/batch', r), null);
});

test('F4: integration stats and refresh document 503 (platform not configured)', (t) => {
  for (const path of ['/v1/integrations/{id}/stats', '/v1/integrations/{id}/refresh'])
    t.regex(doc.paths[path].post.responses['503'].description, /not configured/);
});

/** Bodies whose spec row says "at least one" (spec §1: "where stated"). */
const ATLEAST_ONE: Array<[string, string]> = [
  ['patch', '/v1/devices/{id}'],
  ['patch', '/v1/locations/{id}'],
  ['patch', '/v1/locations/{id}/contacts/{cid}'],
  ['patch', '/v1/geofences/{id}'],
  ['patch', '/v1/trip-categories/{id}'],
  ['put', '/v1/chat/settings'],
];
/** PATCH bodies the spec or decisions.md make "all optional" without "at least one": {} is a no-op. */
const ALL_OPTIONAL: Array<[string, string]> = [
  ['patch', '/v1/users/{id}'],
  ['patch', '/v1/roles/{id}'],
  ['patch', '/v1/api-keys/{id}'],
  ['patch', '/v1/oauth/clients/{id}'],
  ['patch', '/v1/trips/{id}'],
];

function ajvFor(): Ajv2020 {
  const ajv = new Ajv2020({ strict: false });
  addFormats(ajv);
  ajv.addSchema({
    $id: 'components',
    $defs: JSON.parse(JSON.stringify(doc.components.schemas).replaceAll('#/components/schemas/', 'components#/$defs/')),
  });
  return ajv;
}
const local = (s: unknown) => JSON.parse(JSON.stringify(s).replaceAll('#/components/schemas/', 'components#/$defs/'));

test('F5: "at least one field" bodies: the document refuses {} as the service does', async (t) => {
  const s = stack();
  const ajv = ajvFor();
  for (const [method, path] of ATLEAST_ONE) {
    const schema = doc.paths[path][method].requestBody.content['application/json'].schema;
    const validate = ajv.compile(local(schema));
    t.false(validate({}), `${method} ${path}: {} passes the document`);
    // One field is enough.
    const one = Object.keys(resolve(schema).properties).some((field) =>
      [null, true, 'xyz', 1].some((value) => validate({ [field]: value })),
    );
    t.true(one, `${method} ${path}: no one-field body passes`);
    t.is(resolve(schema).minProperties, 1);
  }
  const device = await s.request('POST', '/v1/devices', { token: admin.token, body: { name: 'd1' } });
  t.is(device.status, 201);
  const r = await s.request('PATCH', `/v1/devices/${device.body.data.id}`, { token: admin.token, body: {} });
  t.is(r.status, 400);
  t.regex(r.body.message, /at least one of/);
  // The all-optional bodies accept {}, and their documents say so.
  for (const [method, path] of ALL_OPTIONAL) {
    const schema = doc.paths[path][method].requestBody.content['application/json'].schema;
    t.true(ajv.compile(local(schema))({}), `${method} ${path}: {} is refused by the document`);
  }
});

test('F6: GraphQL operations document their errors in GraphQL format, 401 and 429 included', (t) => {
  for (const method of ['get', 'post']) {
    const op = doc.paths['/v1/gql'][method];
    for (const status of ['400', '401', '403', '429', '503'])
      t.deepEqual(op.responses[status].content['application/json'].schema, {
        $ref: '#/components/schemas/GraphQLResult',
      });
  }
});

test('F9/F8b: form bodies are documented where every field is text, and accepted there', async (t) => {
  const s = stack();
  const devices = doc.paths['/v1/devices'].post.requestBody.content;
  t.truthy(devices['application/x-www-form-urlencoded']);
  const r = await s.request('POST', '/v1/devices', {
    token: admin.token,
    rawBody: 'name=formdev',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  t.is(r.status, 201);
  t.is(r.body.data.name, 'formdev');
  // A body with a number (a geofence's radius) cannot be a form: JSON only.
  t.deepEqual(Object.keys(doc.paths['/v1/geofences'].post.requestBody.content), ['application/json']);
  t.truthy(doc.paths['/v1/oauth/token'].post.requestBody.content['application/x-www-form-urlencoded']);
  const token = await s.request('POST', '/v1/oauth/token', {
    rawBody: 'grant_type=refresh_token&refresh_token=bogus',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  t.true([400, 401].includes(token.status), token.text);
  t.truthy(token.body.error_description);
  t.is(problem('POST', '/v1/oauth/token', token), null);
  // The token endpoint answers a body of another type with 400 invalid_request (RFC 6749), not 415.
  const plain = await s.request('POST', '/v1/oauth/token', {
    rawBody: 'grant_type=refresh_token',
    headers: { 'content-type': 'text/plain' },
  });
  t.is(plain.status, 400);
  t.is(problem('POST', '/v1/oauth/token', plain), null);
  t.falsy(doc.paths['/v1/oauth/token'].post.responses['415']);
  t.truthy(doc.paths['/v1/oauth/clients'].post.responses['415']);
});

test("F10: Swagger UI's files are documented with the types they are served as", async (t) => {
  const s = stack();
  const content = doc.paths['/v1/swagger-ui/{file}'].get.responses['200'].content;
  for (const file of ['swagger-ui.css', 'swagger-ui-bundle.js', 'favicon-32x32.png']) {
    const r = await s.request('GET', `/v1/swagger-ui/${file}`);
    t.is(r.status, 200, file);
    t.truthy(content[r.headers.get('content-type')!.split(';')[0]], `${file}: ${r.headers.get('content-type')}`);
  }
});

test('F11: the document says the queue dashboard is left out', (t) => {
  t.regex(doc.info.description, /\/v1\/admin\/queues/);
  t.regex(doc.paths['/v1/admin/queues/session'].post.description, /not part of this document/);
});

test('F12: audit dates are documented as the service checks them; 500 is documented', async (t) => {
  const s = stack();
  const param = doc.paths['/v1/admin/audit'].get.parameters.find((p: Schema) => p.name === 'start_date');
  const validate = ajvFor().compile(param.schema);
  t.false(validate('garbage'));
  for (const ok of ['2026-01-01', '2026-01-01T10:00', '2026-01-01T10:00:00.123+02:00', '2026-01-01T10:00:00Z'])
    t.true(validate(ok), ok);
  const r = await s.request('GET', '/v1/admin/audit?start_date=garbage', { token: admin.token });
  t.is(r.status, 400);
  t.truthy(doc.paths['/v1/user/export/logs'].get.responses['500']);
});

test('F13: routes that check app credentials themselves document them', async (t) => {
  const s = stack();
  t.deepEqual(doc.components.securitySchemes.idAppKey, {
    type: 'apiKey',
    in: 'header',
    name: 'X-ID-App-Key',
    description: 'The secret of an internal app (spec §5.8)',
  });
  t.is(doc.components.securitySchemes.idAppAssertion.name, 'X-ID-App-Assertion');
  const audit = doc.paths['/v1/internal/audit'].post;
  t.deepEqual(audit.security, [{ idAppKey: [] }, { idAppKey: [], idAppAssertion: [] }, { bearerAuth: [] }]);
  for (const method of ['get', 'post'])
    t.deepEqual(doc.paths['/v1/oauth/authorize'][method].security, [{ idAppAssertion: [] }]);
  for (const op of [audit, doc.paths['/v1/oauth/authorize'].get]) t.notRegex(op.description, /Access: public/);
  // The token endpoint takes HTTP Basic client credentials, or none (they may be in the body).
  t.like(doc.components.securitySchemes.clientBasic, { type: 'http', scheme: 'basic' });
  t.deepEqual(doc.paths['/v1/oauth/token'].post.security, [{ clientBasic: [] }, {}]);
  t.regex(doc.paths['/v1/oauth/token'].post.description, /Access: public; HTTP Basic client credentials/);
  const r = await s.request('POST', '/v1/internal/audit', { body: { event_type: 'login' } });
  t.is(r.status, 401);
  t.is(problem('POST', '/v1/internal/audit', r), null);
});
