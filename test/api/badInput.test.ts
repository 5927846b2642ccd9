import test from 'ava';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { createUser, TestUser } from '../helpers/factories';
import { rawRequest } from '../helpers/rawHttp';
import { HttpResult, useStack } from '../helpers/stack';

// The sweep sends a few thousand requests as one admin: lift the rate limits (malformed bodies count too).
const stack = useStack(test, {
  env: { RATE_LIMIT_USER: '1000000', RATE_LIMIT_ANONYMOUS: '1000000', RATE_LIMIT_GPS_POST: '1000000' },
});

/** The subset of JSON Schema (OpenAPI 3.1) the route documents use. */
interface Schema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  enum?: unknown[];
}

interface Operation {
  description?: string;
  parameters?: Array<{ name: string; in: 'path' | 'query'; schema: Schema }>;
  requestBody?: { content: { 'application/json': { schema: Schema } } };
  responses?: Record<string, unknown>;
}

interface Route {
  method: string;
  /** OpenAPI path, e.g. /v1/trips/{id}. */
  path: string;
  op: Operation;
}

interface OpenApiDoc {
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
}

let doc: OpenApiDoc;
let routes: Route[];
let admin: TestUser;

let ready: Promise<void> | undefined;
/** The route table (from the OpenAPI document the router registered) and a super admin; once per file. */
function init(): Promise<void> {
  ready ??= (async () => {
    const s = stack();
    doc = (await s.request('GET', '/v1/openapi.json')).body;
    // GraphQL endpoints answer GraphQL-over-HTTP errors ({errors}), not {error, message}.
    routes = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([, op]) => (op as Record<string, unknown>)['x-protocol'] !== 'graphql')
        .map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
    );
    admin = await createUser(s.db, { roles: ['role_admin'] });
  })();
  return ready;
}

const NUL = 'a\u0000b';

function resolve(s: Schema): Schema {
  return s.$ref ? resolve(doc.components!.schemas![s.$ref.split('/').pop()!]) : s;
}

/** The JSON types a schema accepts; empty means anything. */
function types(raw: Schema): Set<string> {
  const s = resolve(raw);
  const alts = s.anyOf ?? s.oneOf;
  if (alts) return new Set(alts.flatMap((a) => [...types(a)]));
  if (s.allOf) return types(s.allOf[0]);
  const out = new Set<string>(s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type]);
  if (out.has('integer')) out.add('number');
  if (s.enum) for (const v of s.enum) out.add(v === null ? 'null' : typeof v);
  return out;
}

/** Paths (as key arrays) of every place in a body where a string may go. */
function stringSlots(raw: Schema, at: Array<string | number> = []): Array<Array<string | number>> {
  const s = resolve(raw);
  const alts = s.anyOf ?? s.oneOf ?? s.allOf;
  if (alts) return alts.flatMap((a) => stringSlots(a, at));
  const t = types(s);
  const out: Array<Array<string | number>> = [];
  if (t.size === 0 || t.has('string')) out.push(at);
  for (const [k, p] of Object.entries(s.properties ?? {})) out.push(...stringSlots(p, [...at, k]));
  if (s.items) out.push(...stringSlots(s.items, [...at, 0]));
  return out;
}

function setAt(path: Array<string | number>, value: unknown): unknown {
  if (!path.length) return value;
  const [head, ...rest] = path;
  return typeof head === 'number' ? [setAt(rest, value)] : { [head]: setAt(rest, value) };
}

/** A value of a JSON type the schema does not accept, or undefined when it accepts anything. */
function wrongValue(s: Schema): unknown {
  const t = types(s);
  if (t.size === 0) return undefined;
  const candidates: Array<[string, unknown]> = [
    ['number', 12345],
    ['string', 'wrong'],
    ['boolean', true],
    ['object', { wrong: 1 }],
    ['array', ['wrong']],
  ];
  return candidates.find(([type]) => !t.has(type))?.[1];
}

const isSystemRoute = (r: Route) => /Access: system\./.test(r.op.description ?? '');
const tokenFor = (r: Route) => (isSystemRoute(r) ? stack().systemKey : admin.token);
const pathParams = (r: Route) => (r.op.parameters ?? []).filter((p) => p.in === 'path');
const queryParams = (r: Route) => (r.op.parameters ?? []).filter((p) => p.in === 'query');
const bodySchema = (r: Route) => r.op.requestBody?.content['application/json'].schema;
/**
 * The body a route validates: none for the spec's placeholder (POST /v1/auth/validate), which
 * documents its body but answers its 501 whatever it is sent (the property test below checks it).
 */
const validatedBody = (r: Route) => (r.op.responses?.['501'] ? undefined : bodySchema(r));

/**
 * The route's path with every parameter a fresh UUID, except `override`, and except parameters
 * whose schema is a pattern a UUID does not match (chat snowflakes): those get digits.
 */
function concretePath(r: Route, override: Record<string, string> = {}): string {
  const patterns = new Map(pathParams(r).map((p) => [p.name, (p.schema as { pattern?: string }).pattern]));
  const fresh = (name: string) => {
    const id = randomUUID();
    const pattern = patterns.get(name);
    return pattern && !new RegExp(pattern).test(id) ? String(Date.now()) : id;
  };
  return r.path.replace(/\{([^}]+)\}/g, (_, name: string) => override[name] ?? fresh(name));
}

/** Why an answer is not a 4xx `{error, message}`, or null when it is. */
function notClientError(r: { status: number; body: any }): string | null {
  if (r.status < 400 || r.status >= 500) return `status ${r.status}`;
  if (typeof r.body !== 'object' || typeof r.body?.error !== 'string' || typeof r.body?.message !== 'string')
    return `body ${JSON.stringify(r.body)}`;
  return null;
}

/** Runs `probe` over `cases` with some concurrency and returns the failures it reports. */
async function sweep<T>(cases: T[], probe: (c: T) => Promise<string | null>): Promise<string[]> {
  const failures: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < cases.length) {
        const problem = await probe(cases[next++]);
        if (problem) failures.push(problem);
      }
    }),
  );
  return failures;
}

const describe = (r: Route, res: HttpResult) => `${r.method} ${r.path}: ${res.status} ${res.text.slice(0, 200)}`;

test('the sweep covers the route table', async (t) => {
  await init();
  t.true(routes.length > 100, `${routes.length} routes`);
  t.true(routes.some((r) => bodySchema(r)));
});

test('a NUL byte in any string field of any body is a 400 naming the field', async (t) => {
  await init();
  const s = stack();
  const cases = routes.flatMap((r) => {
    const schema = bodySchema(r);
    return schema
      ? stringSlots(schema)
          .filter((p) => p.length)
          .map((slot) => ({ r, slot }))
      : [];
  });
  t.true(cases.length > 100, `${cases.length} string fields`);
  const failures = await sweep(cases, async ({ r, slot }) => {
    const res = await s.request(r.method, concretePath(r), { token: tokenFor(r), body: setAt(slot, NUL) });
    const field = slot.join('.');
    if (res.status !== 400 || !res.body?.message?.includes(`${field}: must not contain NUL`))
      return `${field} → ${describe(r, res)}`;
    return null;
  });
  t.deepEqual(failures, []);
});

test('a NUL byte or a lone surrogate in a path parameter is a 400 or 404, never a 500', async (t) => {
  await init();
  const s = stack();
  const cases = routes.flatMap((r) =>
    pathParams(r).flatMap((p) =>
      ['a%00b', '%00', 'a%ED%A0%80', '%F0%9F', '%'].map((value) => ({ r, p: p.name, value })),
    ),
  );
  const failures = await sweep(cases, async ({ r, p, value }) => {
    const res = await s.request(r.method, concretePath(r, { [p]: value }), {
      token: tokenFor(r),
      ...(bodySchema(r) ? { body: {} } : {}),
    });
    const problem = notClientError(res) ?? (res.status === 400 || res.status === 404 ? null : 'not 400/404');
    return problem && `${p}=${value}: ${problem} ← ${describe(r, res)}`;
  });
  t.deepEqual(failures, []);
});

test('a NUL byte in a query parameter is a 400 naming the parameter', async (t) => {
  await init();
  const s = stack();
  const cases = routes.flatMap((r) => queryParams(r).map((p) => ({ r, p: p.name })));
  t.true(cases.length > 10);
  const failures = await sweep(cases, async ({ r, p }) => {
    const res = await s.request(r.method, `${concretePath(r)}?${p}=a%00b`, { token: tokenFor(r) });
    return res.status === 400 && res.body?.message?.includes(`${p}: must not contain NUL`)
      ? null
      : `${p} → ${describe(r, res)}`;
  });
  t.deepEqual(failures, []);
});

test('a NUL byte in an undeclared query parameter is a 400 naming it on every GET, documents and GraphQL included', async (t) => {
  await init();
  const s = stack();
  // The route table's GETs (documents among them) and GraphQL's, which the table keeps apart.
  const gets = [...routes.filter((r) => r.method === 'GET'), { method: 'GET', path: '/v1/gql', op: {} } as Route];
  t.true(gets.some((r) => r.path === '/v1/openapi.json'));
  const failures = await sweep(gets, async (r) => {
    const res = await s.request(r.method, `${concretePath(r)}?zzz=a%00b`, { token: tokenFor(r) });
    const message: string | undefined = res.body?.message ?? res.body?.errors?.[0]?.message;
    return res.status === 400 && message?.includes('zzz: must not contain NUL') ? null : describe(r, res);
  });
  t.deepEqual(failures, []);
  // GraphQL's envelope: a NUL in a top-level key of the body.
  const gql = await s.request('POST', '/v1/gql', {
    token: tokenFor(gets[0]),
    body: { query: '{ __typename }', 'k\u0000': 1 },
  });
  t.is(gql.status, 400, gql.text);
  t.regex(gql.body.errors[0].message, /keys must not contain NUL/);
});

test('a form body is refused (415) exactly where the document lists no form', async (t) => {
  await init();
  const s = stack();
  const cases = routes.filter((r) => bodySchema(r));
  const formOk = (r: Route) =>
    Boolean((r.op.requestBody?.content as Record<string, unknown>)['application/x-www-form-urlencoded']);
  t.true(cases.some(formOk) && cases.some((r) => !formOk(r)));
  const failures = await sweep(cases, async (r) => {
    const res = await s.request(r.method, concretePath(r), {
      token: tokenFor(r),
      // A NUL value: a route that takes the form refuses it (400) without doing anything.
      rawBody: 'name=a%00b',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    if (formOk(r)) return res.status === 400 ? null : `listed a form but answered: ${describe(r, res)}`;
    return res.status === 415 && res.body?.message?.includes('takes a JSON body') ? null : describe(r, res);
  });
  t.deepEqual(failures, []);
});

test('an integer query parameter beyond 2^53 is a 400 naming the parameter', async (t) => {
  await init();
  const s = stack();
  const isInteger = (schema: Schema) =>
    schema.type === 'integer' || (Array.isArray(schema.type) && schema.type.includes('integer'));
  const cases = routes.flatMap((r) =>
    queryParams(r)
      .filter((p) => isInteger(p.schema))
      .map((p) => ({ r, p: p.name })),
  );
  t.true(cases.length > 10);
  const failures = await sweep(cases, async ({ r, p }) => {
    const res = await s.request(r.method, `${concretePath(r)}?${p}=99999999999999999999`, { token: tokenFor(r) });
    return res.status === 400 && res.body?.message?.startsWith(`${p}: `) ? null : `${p} → ${describe(r, res)}`;
  });
  t.deepEqual(failures, []);
});

test('a lone UTF-16 surrogate in a string field is a 400 naming the field', async (t) => {
  await init();
  const s = stack();
  const cases: Array<[string, string, unknown, string]> = [
    ['POST', '/v1/devices', { name: 'ok\uD800' }, 'name'],
    ['POST', '/v1/trips', { name: 'trip', tags: ['\uDC00x'] }, 'tags.0'],
    ['POST', '/v1/internal/audit', { event_type: 'login', metadata: { note: 'x\uDBFF' } }, 'metadata.note'],
  ];
  for (const [method, path, body, field] of cases) {
    const res = await s.request(method, path, { token: admin.token, body });
    t.is(res.status, 400, res.text);
    t.true(res.body.message.includes(`${field}: must not contain unpaired UTF-16 surrogates`), res.text);
  }
});

test('a field of the wrong JSON type is a 400 naming the field', async (t) => {
  await init();
  const s = stack();
  const cases = routes.flatMap((r) => {
    const schema = validatedBody(r);
    if (!schema) return [];
    return Object.entries(resolve(schema).properties ?? {})
      .map(([field, fs]) => ({ r, field, value: wrongValue(fs) }))
      .filter((c) => c.value !== undefined);
  });
  const failures = await sweep(cases, async ({ r, field, value }) => {
    const res = await s.request(r.method, concretePath(r), { token: tokenFor(r), body: { [field]: value } });
    const named = res.body?.details?.some(
      (d: { field: string }) => d.field === field || d.field.startsWith(`${field}.`),
    );
    return res.status === 400 && named ? null : `${field}=${JSON.stringify(value)} → ${describe(r, res)}`;
  });
  t.deepEqual(failures, []);
});

test('bodies that are not objects are a 400 with {error, message}', async (t) => {
  await init();
  const s = stack();
  const bodies = ['[]', '"text"', '42', 'null', 'true', '{"a":', '\u0000'];
  const cases = routes.filter((r) => validatedBody(r)).flatMap((r) => bodies.map((rawBody) => ({ r, rawBody })));
  const failures = await sweep(cases, async ({ r, rawBody }) => {
    const res = await s.request(r.method, concretePath(r), { token: tokenFor(r), rawBody });
    const problem = notClientError(res) ?? (res.status === 400 ? null : 'not 400');
    return problem && `${JSON.stringify(rawBody)}: ${problem} ← ${describe(r, res)}`;
  });
  t.deepEqual(failures, []);
});

test('property: arbitrary JSON bodies never get a 5xx, and errors are {error, message}', async (t) => {
  await init();
  const s = stack();
  const withBody = routes.filter((r) => bodySchema(r));
  const failures: string[] = [];
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...withBody), fc.jsonValue({ maxDepth: 3 }), async (r, body) => {
      const res = await s.request(r.method, concretePath(r), { token: tokenFor(r), rawBody: JSON.stringify(body) });
      // The spec's placeholder (POST /v1/auth/validate) answers its documented 501 whatever it is sent.
      const documented5xx = res.status === 501 && !!r.op.responses?.['501'];
      const problem = documented5xx
        ? typeof res.body?.error !== 'string' || typeof res.body?.message !== 'string'
        : res.status >= 500 || (res.status >= 400 && notClientError(res));
      if (problem) failures.push(`${JSON.stringify(body)} → ${describe(r, res)}`);
      return !problem;
    }),
    { numRuns: 300 },
  );
  t.deepEqual(failures, []);
});

test('unknown methods: 405 with Allow listing the path’s methods, 404 on an unknown path', async (t) => {
  await init();
  const s = stack();
  // GraphQL endpoints answer in GraphQL's error format ({errors}); their 405 is checked in test/graphql.
  const paths = Object.keys(doc.paths).filter((p) =>
    Object.values(doc.paths[p]).some((op) => (op as Record<string, unknown>)['x-protocol'] !== 'graphql'),
  );
  const failures = await sweep(
    paths.flatMap((path) => ['TRACE', 'PROPFIND'].map((method) => ({ path, method }))),
    async ({ path, method }) => {
      const target = path.replace(/\{[^}]+\}/g, () => randomUUID());
      const res = await rawRequest(
        s.api.port,
        `${method} ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin.token}\r\nConnection: close\r\n\r\n`,
      );
      const allow = (res.headers.allow ?? '').split(/,\s*/);
      const documented = Object.keys(doc.paths[path]).map((m) => m.toUpperCase());
      if (res.status !== 405 || notClientError(res) || !documented.every((m) => allow.includes(m))) {
        return `${method} ${path}: ${res.status} allow=${res.headers.allow} ${res.raw.slice(0, 200)}`;
      }
      return null;
    },
  );
  t.deepEqual(failures, []);
  const unknown = await rawRequest(s.api.port, 'TRACE /v1/nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  t.is(unknown.status, 404);
  t.is(unknown.body.error, 'NotFound');
  const put = await s.request('PUT', '/v1/health');
  t.is(put.status, 405);
  t.deepEqual(put.headers.get('allow')!.split(/,\s*/).sort(), ['GET', 'HEAD']);
});

test('parser errors get a JSON {error, message} and the connection is closed', async (t) => {
  await init();
  const s = stack();
  const cases: Array<[string, string, number]> = [
    ['invalid method token', 'FOO BAR /v1/health HTTP/1.1\r\nHost: x\r\n\r\n', 400],
    ['unknown method token', 'FOO /v1/health HTTP/1.1\r\nHost: x\r\n\r\n', 501],
    ['lower-case method', 'get /v1/health HTTP/1.1\r\nHost: x\r\n\r\n', 501],
    ['60 KB header', `GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(60_000)}\r\n\r\n`, 431],
    [
      'bad chunk size',
      'POST /v1/devices HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n',
      400,
    ],
    ['garbage request line', 'hello\r\n\r\n', 400],
    ['CONNECT', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 405],
    ['HTTP/1.1 without Host', 'GET /v1/health HTTP/1.1\r\nConnection: keep-alive\r\n\r\n', 400],
    [
      'an Expect Node does not meet',
      'POST /v1/devices HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
      417,
    ],
  ];
  for (const [name, request, status] of cases) {
    const res = await rawRequest(s.api.port, request);
    t.is(res.status, status, `${name}: ${res.raw.slice(0, 200)}`);
    // A method no server here implements is a 501 (RFC 9110 §9.1), in the same shape.
    if (status === 501) {
      t.is(res.body.error, 'NotImplemented', name);
      t.regex(res.body.message, /^method (FOO|get) is not implemented/, name);
    } else t.is(notClientError(res), null, name);
    t.regex(res.headers['content-type'] ?? '', /application\/json/, name);
    t.true(res.closed, `${name}: connection left open`);
  }
  const expectation = await rawRequest(s.api.port, `GET /v1/health HTTP/1.1\r\nHost: x\r\nExpect: foo\r\n\r\n`);
  t.is(expectation.body.error, 'ExpectationFailed');
});

test('a body over the body limit is a 413 with {error, message}', async (t) => {
  await init();
  const s = stack();
  const res = await rawRequest(
    s.api.port,
    `POST /v1/devices HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin.token}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${5 * 1024 * 1024}\r\n\r\n{"name":"`,
  );
  t.is(res.status, 413, res.raw.slice(0, 300));
  t.is(res.body.error, 'PayloadTooLarge');
  t.is(typeof res.body.message, 'string');
});

test('avatar_url must be an http(s) URL: javascript: is a 400 naming avatar_url', async (t) => {
  await init();
  const s = stack();
  const user = await createUser(s.db);
  for (const url of [
    'javascript:alert(1)',
    'data:text/html,<b>x</b>',
    'ftp://example.com/a.png',
    'JAVASCRIPT://%0aalert(1)',
  ]) {
    const res = await s.request('PATCH', `/v1/users/${user.id}`, { token: user.token, body: { avatar_url: url } });
    t.is(res.status, 400, `${url}: ${res.text}`);
    t.regex(res.body.message, /^avatar_url: /, url);
  }
  const ok = await s.request('PATCH', `/v1/users/${user.id}`, {
    token: user.token,
    body: { avatar_url: 'https://example.com/me.png' },
  });
  t.is(ok.status, 200, ok.text);
  const oauth = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { name: 'Someone', oauthProvider: 'github', oauthProviderId: randomUUID(), image: 'javascript:alert(1)' },
  });
  t.is(oauth.status, 400, oauth.text);
  t.regex(oauth.body.message, /^image: /);
  const client = await s.request('POST', '/v1/oauth/clients', {
    token: admin.token,
    body: { name: 'App', redirect_uris: ['https://app.example/cb'], homepage_url: 'javascript:alert(1)' },
  });
  t.is(client.status, 400, client.text);
  t.regex(client.body.message, /^homepage_url: /);
});

test('a NUL byte in a device name is a 400 naming the field, and nothing is stored', async (t) => {
  await init();
  const s = stack();
  const before = (await s.db('devices').count('* as c').first())!.c;
  const res = await s.request('POST', '/v1/devices', { token: admin.token, body: { name: 'tracker\u0000one' } });
  t.is(res.status, 400, res.text);
  t.is(res.body.error, 'BadRequest');
  t.regex(res.body.message, /^name: must not contain NUL/);
  t.deepEqual(res.body.details, [{ field: 'name', message: 'must not contain NUL characters' }]);
  t.is((await s.db('devices').count('* as c').first())!.c, before);
});

test('GraphQL arguments pass the same text rule, inline or as variables', async (t) => {
  await init();
  const s = stack();
  const asVariable = await s.request('POST', '/v1/gql', {
    token: admin.token,
    body: {
      query: 'query($slug: String!) { findUserByPlatform(platformSlug: $slug, platformUserId: "x") }',
      variables: { slug: NUL },
    },
  });
  const inline = await s.request('POST', '/v1/gql', {
    token: admin.token,
    body: { query: '{ findUserByPlatform(platformSlug: "email", platformUserId: "a\\u0000b") }' },
  });
  for (const [name, r, field] of [
    ['variable', asVariable, 'platformSlug'],
    ['inline', inline, 'platformUserId'],
  ] as const) {
    t.is(r.status, 200, r.text);
    const err = r.body.errors?.[0];
    t.is(err?.extensions?.code, 'BAD_USER_INPUT', `${name}: ${r.text}`);
    t.is(err?.extensions?.status, 400, name);
    t.regex(err?.message ?? '', new RegExp(`^${field}: must not contain NUL`), name);
  }
});

test('a body that is not UTF-8 is refused, never stored with U+FFFD in place of what was sent', async (t) => {
  await init();
  const s = stack();
  const url = `http://127.0.0.1:${s.api.port}/v1/devices`;
  const post = (body: RequestInit['body'], type = 'application/json', extra: RequestInit = {}) =>
    fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin.token}`, 'content-type': type },
      body,
      ...extra,
    }).then(async (r) => ({
      status: r.status,
      body: (await r.json()) as { error: string; message: string; data?: any },
    }));
  const bytes = (...parts: Array<string | number[]>) =>
    Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));
  /** Sends `body` as two chunks split at `at` (Transfer-Encoding: chunked, no Content-Length). */
  const postInTwoChunks = (body: Buffer, at: number, type: string) =>
    post(
      new ReadableStream({
        start(c) {
          c.enqueue(body.subarray(0, at));
          c.enqueue(body.subarray(at));
          c.close();
        },
      }),
      type,
      { duplex: 'half' } as RequestInit,
    );
  const before = (await s.db('devices').count('* as c').first())!.c;
  // Bytes that are not UTF-8 (0xFF 0xFE), with a Content-Length: the fast path.
  const invalid = bytes('{"name":"inv', [0xff, 0xfe], 'utf"}');
  for (const type of ['application/json', 'application/vnd.api+json']) {
    const r = await post(invalid, type);
    t.is(r.status, 400, `${type}: ${JSON.stringify(r.body)}`);
    t.is(r.body.message, 'body: not valid UTF-8 (send JSON as UTF-8)');
  }
  // The same sent in chunks (no Content-Length).
  const chunked = await postInTwoChunks(invalid, 8, 'application/json');
  t.is(chunked.status, 400, JSON.stringify(chunked.body));
  // A charset other than UTF-8 is a 415 naming it: Latin-1's é would be read wrong.
  const latin = await post(bytes('{"name":"caf', [0xe9], '"}'), 'application/json; charset=latin1');
  t.is(latin.status, 415, JSON.stringify(latin.body));
  t.regex(latin.body.message, /charset 'latin1'/);
  t.is((await post('{"name":"x"}', 'application/x-www-form-urlencoded; charset=utf-16')).status, 415);
  t.is((await s.db('devices').count('* as c').first())!.c, before);

  // UTF-8 is kept byte for byte: a real U+FFFD, a BOM dropped, chunks split inside a character, charset=UTF-8.
  const ok = await post(
    bytes([0xef, 0xbb, 0xbf], '{"name":"caf\u00e9 \ufffd \u{1f6a2}"}'),
    'application/json; charset="UTF-8"',
  );
  t.is(ok.status, 201, JSON.stringify(ok.body));
  t.is(ok.body.data!.name, 'caf\u00e9 \ufffd \u{1f6a2}');
  const text = bytes('{"name":"split \u{1f6a2}"}');
  const split = await postInTwoChunks(text, 16, 'application/vnd.api+json');
  t.is(split.status, 201, JSON.stringify(split.body));
  t.is(split.body.data!.name, 'split \u{1f6a2}');
});

test('a chunked JSON body over the limit is a 413', async (t) => {
  await init();
  const s = stack();
  const chunk = Buffer.alloc(1024 * 1024, 0x20);
  let sent = 0;
  const r = await fetch(`http://127.0.0.1:${s.api.port}/v1/devices`, {
    method: 'POST',
    headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
    body: new ReadableStream({
      pull(c) {
        if (sent++ < 6) c.enqueue(chunk);
        else c.close();
      },
    }),
    duplex: 'half',
  } as RequestInit).catch((err: Error) => err);
  if (r instanceof Error) return t.fail(`no answer: ${r.message}`);
  t.is(r.status, 413);
  t.is(((await r.json()) as { error: string }).error, 'PayloadTooLarge');
});

test('header values sent as UTF-8 are read as UTF-8, not stored as mojibake', async (t) => {
  await init();
  const s = stack();
  const agent = 'Agent-ü ∑';
  const info = await rawRequest(
    s.api.port,
    Buffer.from(`GET /v1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nUser-Agent: ${agent}\r\n\r\n`, 'utf8'),
  );
  t.is(info.status, 200, info.raw.slice(0, 300));
  t.is(info.body.client.userAgent, agent);
  // Stored the same way: the session's audit event and the logout's app name.
  const user = await createUser(s.db);
  const body = JSON.stringify({ userId: user.id, expires: new Date(Date.now() + 3600_000).toISOString() });
  const opened = await rawRequest(
    s.api.port,
    Buffer.from(
      `POST /v1/sessions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${s.systemKey}\r\n` +
        `User-Agent: ${agent}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      'utf8',
    ),
  );
  t.is(opened.status, 201, opened.raw.slice(0, 300));
  const token = opened.body.data.sessionToken as string;
  const closed = await rawRequest(
    s.api.port,
    Buffer.from(
      `DELETE /v1/sessions/${token} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${s.systemKey}\r\n` +
        `X-Source-Service: app-ü\r\n\r\n`,
      'utf8',
    ),
  );
  t.is(closed.status, 204, closed.raw.slice(0, 300));
  const events = await s
    .db('audit_events')
    .where('user_id', user.id)
    .whereIn('event_type', ['session_created', 'logout'])
    .select('event_type', 'user_agent', 'metadata');
  t.is(events.find((e) => e.event_type === 'session_created')?.user_agent, agent);
  t.is(events.find((e) => e.event_type === 'logout')?.metadata?.app, 'app-ü');
});

test('percent-escapes that are not UTF-8 are a 400 naming the query parameter, or the path, on every route', async (t) => {
  await init();
  const s = stack();
  // Declared parameters: Node's query parser would have turned %FF%FE into U+FFFD U+FFFD.
  const declared = routes.flatMap((r) => queryParams(r).map((p) => ({ r, p: p.name })));
  t.true(declared.length > 10);
  const failures = await sweep(declared, async ({ r, p }) => {
    const res = await s.request(r.method, `${concretePath(r)}?${p}=%FF%FE`, { token: tokenFor(r) });
    return res.status === 400 && res.body?.message === `${p}: percent-escapes must encode UTF-8`
      ? null
      : `${p} → ${describe(r, res)}`;
  });
  // Undeclared ones too, GraphQL's included; and an encoded lone surrogate (CESU, not UTF-8).
  const gets = [...routes.filter((r) => r.method === 'GET'), { method: 'GET', path: '/v1/gql', op: {} } as Route];
  failures.push(
    ...(await sweep(gets, async (r) => {
      const res = await s.request(r.method, `${concretePath(r)}?zzz=%ED%A0%80`, { token: tokenFor(r) });
      const message: string | undefined = res.body?.message ?? res.body?.errors?.[0]?.message;
      return res.status === 400 && message === 'zzz: percent-escapes must encode UTF-8' ? null : describe(r, res);
    })),
  );
  // A path parameter the router would have kept as the literal text %FF.
  const withParams = routes.filter((r) => pathParams(r).length);
  failures.push(
    ...(await sweep(withParams, async (r) => {
      const res = await s.request(r.method, concretePath(r, { [pathParams(r)[0].name]: 'a%FFb' }), {
        token: tokenFor(r),
        ...(bodySchema(r) ? { body: {} } : {}),
      });
      return res.status === 400 && res.body?.message === 'path: percent-escapes must encode UTF-8'
        ? null
        : describe(r, res);
    })),
  );
  t.deepEqual(failures, []);
  // Escapes of UTF-8 still decode, and a % without two hex digits stays text, as before.
  const fine = await s.request('GET', '/v1/gps?device_id=B%C3%B6%C3%B6t%20%25zz', { token: admin.token });
  t.is(fine.status, 200, fine.text);
});

test('a declared query parameter in array form is a 400 naming it, never dropped with its filter', async (t) => {
  await init();
  const s = stack();
  const cases = routes.filter((r) => r.method === 'GET').flatMap((r) => queryParams(r).map((p) => ({ r, p: p.name })));
  t.true(cases.length > 10);
  const failures = await sweep(cases, async ({ r, p }) => {
    const res = await s.request(r.method, `${concretePath(r)}?${p}[]=x`, { token: tokenFor(r) });
    return res.status === 400 && res.body?.message?.startsWith(`${p}[]: ${p} takes one value`)
      ? null
      : `${p} → ${describe(r, res)}`;
  });
  t.deepEqual(failures, []);
  // Encoded brackets are the same parameter; an undeclared bracketed name is ignored like any other.
  t.is((await s.request('GET', '/v1/trips?status%5B0%5D=draft', { token: admin.token })).status, 400);
  t.is((await s.request('GET', '/v1/trips?zzz[]=1', { token: admin.token })).status, 200);
});

test('a single-valued query parameter sent twice is a 400 saying so, on every route', async (t) => {
  await init();
  const s = stack();
  const takesList = (schema: Schema): boolean =>
    schema.type === 'array' || [...(schema.anyOf ?? []), ...(schema.oneOf ?? [])].some(takesList);
  const cases = routes.flatMap((r) =>
    queryParams(r)
      .filter((p) => !takesList(p.schema))
      .map((p) => ({ r, p: p.name })),
  );
  t.true(cases.length > 10);
  const failures = await sweep(cases, async ({ r, p }) => {
    const res = await s.request(r.method, `${concretePath(r)}?${p}=1&${p}=2`, { token: tokenFor(r) });
    return res.status === 400 && res.body?.message === `${p}: given more than once`
      ? null
      : `${p} → ${describe(r, res)}`;
  });
  t.deepEqual(failures, []);
  // Once is fine, and so is another parameter next to it.
  t.is((await s.request('GET', '/v1/users?limit=5&page=1', { token: admin.token })).status, 200);
});

test('an array beyond its bound is one issue, refused before its items are read', async (t) => {
  await init();
  const s = stack();
  // A million bad scopes (4 MB, within the body limit): before, every item was checked and
  // reported, answering ~100 MB and holding the event loop for seconds. Now it is more values than
  // a body may hold, refused before it is parsed.
  const huge = await s.request('POST', '/v1/api-keys', {
    token: admin.token,
    body: { name: 'k', scopes: Array.from({ length: 1_000_000 }, () => 'a') },
  });
  t.is(huge.status, 413);
  t.regex(huge.body.message, /^body: too many JSON values/);
  // As many as a body may hold: one issue, the bound.
  const bounded = await s.request('POST', '/v1/api-keys', {
    token: admin.token,
    body: { name: 'k', scopes: Array.from({ length: 45_000 }, () => 'a') },
  });
  t.is(bounded.status, 400);
  t.is(bounded.body.message, 'scopes: Array must contain at most 200 element(s)');
  t.is(bounded.body.details.length, 1);
  for (const [path, body, field] of [
    ['/v1/trips', { name: 't', tags: Array.from({ length: 45_000 }, () => '') }, 'tags'],
    ['/v1/trip-templates', { name: 't', tags: Array.from({ length: 45_000 }, () => 7) }, 'tags'],
    ['/v1/locations', { name: 'l', contacts: Array.from({ length: 22_000 }, () => ({})) }, 'contacts'],
  ] as const) {
    const r = await s.request('POST', path, { token: admin.token, body });
    t.is(r.status, 400, path);
    t.regex(r.body.message, new RegExp(`^${field}: Array must contain at most \\d+ element\\(s\\)$`), path);
  }
  // Within the bound, every bad item is checked, and at most 20 are reported.
  const many = await s.request('POST', '/v1/api-keys', {
    token: admin.token,
    body: { name: 'k', scopes: Array.from({ length: 150 }, (_, i) => `bad ${i}`) },
  });
  t.is(many.status, 400);
  t.is(many.body.details.length, 20);
  t.is(many.body.details[0].field, 'scopes.0');
  t.regex(many.body.message, /; and 130 more problems$/);
});

test.serial('parameters and body fields an operation does not list are ignored, as docs/api.md says', async (t) => {
  await init();
  const s = stack();
  const page = await s.request('GET', '/v1/devices?limt=1&_=123', { token: admin.token });
  t.is(page.status, 200, page.text);
  t.is(page.body.pagination.limit, 10, 'the default limit: the misspelt one is not read');
  const made = await s.request('POST', '/v1/devices', {
    token: admin.token,
    body: { name: 'extra fields', colour: 'red' },
  });
  t.is(made.status, 201, made.text);
  t.is(made.body.data.name, 'extra fields');
  t.false('colour' in made.body.data);
  // Serial, and taken away again: other tests of this file count the devices stored.
  await s.db('devices').where('id', made.body.data.id).delete();
  // A listed field with a bad value is still refused, naming it.
  const bad = await s.request('POST', '/v1/devices', { token: admin.token, body: { name: 5, colour: 'red' } });
  t.is(bad.status, 400);
  t.regex(bad.body.message, /^name/);
});
