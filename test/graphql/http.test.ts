import test from 'ava';
import { serverAudits } from 'graphql-http';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

// The audits send ~60 anonymous requests: room for them in the anonymous tier.
const stack = useStack(test, { env: { RATE_LIMIT_ANONYMOUS: '100000' } });

test('graphql-http server audits: every one passes against /v1/gql (MUST, SHOULD and MAY)', async (t) => {
  const s = stack();
  const audits = serverAudits({ url: `${s.url}/v1/gql` });
  t.true(audits.filter((a) => /^MUST/.test(a.name)).length >= 13);
  t.true(audits.filter((a) => /^SHOULD/.test(a.name)).length >= 23);
  const failed: string[] = [];
  for (const audit of audits) {
    const result = await audit.fn();
    if (result.status !== 'ok') failed.push(`${audit.id} ${audit.name}: ${result.reason}`);
  }
  t.deepEqual(failed, []);
});

test('GET runs queries, refuses mutations; a batch (array of operations) is refused', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const get = await s.request('GET', `/v1/gql?query=${encodeURIComponent('{ me { userId } }')}`, {
    token: user.token,
    headers: { accept: 'application/graphql-response+json' },
  });
  t.is(get.status, 200, get.text);
  t.is(get.body.data.me.userId, user.id);
  // Two queries (or two sets of variables) in one GET: refused, rather than running the first.
  for (const name of ['query', 'variables']) {
    const twice = await s.request(
      'GET',
      `/v1/gql?query=${encodeURIComponent('{ me { userId } }')}&${name}=${encodeURIComponent(name === 'query' ? '{ __typename }' : '{}')}${name === 'variables' ? '&variables=%7B%7D' : ''}`,
      { token: user.token },
    );
    t.is(twice.status, 400, twice.text);
    t.is(twice.body.errors[0].message, `${name}: given more than once`);
  }
  // The answer's type follows the Accept header, as graphql-http negotiates it.
  t.is(get.headers.get('content-type'), 'application/graphql-response+json; charset=utf-8');
  for (const accept of [undefined, 'application/json', '*/*', 'text/html, application/json;q=0.9']) {
    const r = await s.request('POST', '/v1/gql', {
      token: user.token,
      body: { query: '{ me { userId } }' },
      headers: accept ? { accept } : {},
    });
    t.is(r.headers.get('content-type'), 'application/json; charset=utf-8', accept);
    t.is(r.text, JSON.stringify({ data: { me: { userId: user.id } } }));
  }
  const refused = await s.request('POST', '/v1/gql', { body: { query: '{ me { userId } }' } });
  t.is(
    refused.text,
    JSON.stringify({
      errors: [
        {
          message: 'authentication required',
          locations: [{ line: 1, column: 3 }],
          path: ['me'],
          extensions: { code: 'UNAUTHENTICATED', status: 401 },
        },
      ],
      data: { me: null },
    }),
  );
  const mutation = await s.request(
    'GET',
    `/v1/gql?query=${encodeURIComponent('mutation { mintWsTicket { ticket } }')}`,
    {
      token: user.token,
    },
  );
  t.is(mutation.status, 405);
  t.is(mutation.headers.get('allow'), 'POST');
  t.deepEqual(mutation.body.errors[0].extensions, { code: 'METHOD_NOT_ALLOWED', status: 405 });
  // Several operations: the one to run is named, or the error says so.
  const two = 'query A { me { userId } } query B { platforms { slug } }';
  for (const [operationName, message] of [
    [undefined, 'operationName: required when the document defines several operations'],
    ['C', 'operationName: the document defines no operation C'],
  ] as const) {
    const r = await s.request('POST', '/v1/gql', { token: user.token, body: { query: two, operationName } });
    t.is(r.body.errors[0].message, message);
    t.is(r.body.errors[0].extensions.code, 'BAD_USER_INPUT');
  }
  // A name that names nothing in a document of one unnamed operation (the cost rule crashed on it: a 500).
  const unnamed = await s.request('GET', `/v1/gql?query=${encodeURIComponent('{ __typename }')}&operationName=Foo`, {
    token: user.token,
  });
  // A request error: 200 to an application/json client (GraphQL over HTTP), never a 500.
  t.is(unnamed.status, 200, unnamed.text);
  t.is(unnamed.body.errors[0].message, 'operationName: the document defines no operation Foo');
  const unnamedPost = await s.request('POST', '/v1/gql', {
    token: user.token,
    body: { query: '{ me { userId } }', operationName: 'Foo' },
  });
  t.is(unnamedPost.status, 200, unnamedPost.text);
  t.is(unnamedPost.body.errors[0].extensions.code, 'BAD_USER_INPUT');
  const empty = await s.request('POST', '/v1/gql', {
    token: user.token,
    body: { query: '{ me { userId } }', operationName: '' },
  });
  t.regex(empty.body.errors[0].message, /^operationName: must not be empty/);
  // A malformed envelope: 400, BAD_USER_INPUT, the field named.
  for (const [body, message] of [
    [{ query: '{ me { userId } }', variables: 'x' }, 'variables: must be an object (or null)'],
    [{ query: '{ me { userId } }', operationName: 5 }, 'operationName: must be a string (or null)'],
    [{ query: 5 }, 'query: must be a string'],
    [{ variables: {} }, 'query: is required'],
  ] as const) {
    const r = await s.request('POST', '/v1/gql', { token: user.token, body });
    t.is(r.status, 400, r.text);
    t.deepEqual(r.body.errors[0], { message, extensions: { code: 'BAD_USER_INPUT', status: 400 } });
  }
  const named = await s.request('POST', '/v1/gql', { token: user.token, body: { query: two, operationName: 'A' } });
  t.is(named.body.data.me.userId, user.id);
  const batch = await s.request('POST', '/v1/gql', {
    token: user.token,
    body: [{ query: '{ me { userId } }' }, { query: '{ me { userId } }' }],
  });
  t.is(batch.status, 400);
  t.regex(batch.body.errors?.[0]?.message ?? '', /^body: batches .* not supported/);
  // A GET parameter in array form is named as such, not as missing.
  const arrayForm = await s.request(
    'GET',
    `/v1/gql?${encodeURI('query[]')}=${encodeURIComponent('{ me { userId } }')}`,
    {
      token: user.token,
    },
  );
  t.is(arrayForm.status, 400);
  t.regex(arrayForm.body.errors?.[0]?.message ?? '', /^query: takes one value, without brackets/);
});

test('errors carry extension codes and never a stack', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const anon = await s.request('POST', '/v1/gql', { body: { query: '{ me { userId } }' } });
  t.is(anon.body.errors[0].extensions.code, 'UNAUTHENTICATED');
  const forbidden = await s.request('POST', '/v1/gql', {
    token: user.token,
    body: { query: '{ users { data { id } } }' },
  });
  t.is(forbidden.body.errors[0].extensions.code, 'FORBIDDEN');
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const missing = await s.request('POST', '/v1/gql', {
    token: admin.token,
    body: { query: '{ trip(id: "00000000-0000-4000-8000-000000000000") { id } }' },
  });
  t.is(missing.status, 200);
  t.is(missing.body.data.trip, null);
  t.is(missing.body.errors[0].extensions.code, 'NOT_FOUND');
  const badInput = await s.request('POST', '/v1/gql', {
    token: admin.token,
    body: { query: '{ trips(limit: 1000) { data { id } } }' },
  });
  t.is(badInput.body.errors[0].extensions.code, 'BAD_USER_INPUT');
  t.regex(badInput.body.errors[0].message, /^limit: /);
  const badVariable = await s.request('POST', '/v1/gql', {
    token: admin.token,
    body: { query: 'query($id: String!) { trip(id: $id) { id } }', variables: { id: 5 } },
  });
  t.is(badVariable.body.errors[0].extensions.code, 'BAD_USER_INPUT');
  const syntax = await s.request('POST', '/v1/gql', { token: admin.token, body: { query: '{ me { ' } });
  t.is(syntax.body.errors[0].extensions.code, 'GRAPHQL_PARSE_FAILED');
  const badCredential = await s.request('POST', '/v1/gql', {
    token: 'sess_nope',
    body: { query: '{ me { userId } }' },
  });
  t.is(badCredential.status, 401);
  t.is(badCredential.body.errors[0].extensions.code, 'UNAUTHENTICATED');
  for (const r of [anon, forbidden, missing, badInput, syntax, badCredential]) {
    t.false(/"stack"|at .+\.js:\d+/.test(r.text), r.text);
  }
});

test('the SDL at /v1/schema (no auth) has every operation of the API', async (t) => {
  const s = stack();
  const sdl = await s.request('GET', '/v1/schema');
  t.is(sdl.status, 200);
  for (const op of [
    'platforms:',
    'roles:',
    'me:',
    'mintWsTicket:',
    'oauthSignin(',
    'createAuditEvent(',
    'logAuditEvent(',
    'deleteGpsData(',
    'findUserByPlatform(',
    'user(id',
    'users(',
    'devices(',
    'device(id',
    'trips(',
    'trip(id',
    'gpsPoints(',
    'history:',
    'geofences(',
    'locations(',
    'contacts:',
    'tripCategories:',
    'tripTemplates:',
  ])
    t.true(sdl.text.includes(op), op);
  t.regex(sdl.text, /type Role \{[^}]*requiresTwoFactor: Boolean!/);
});

test('production: no GraphiQL or its assets, errors without stacks', async (t) => {
  const { startStack } = await import('../helpers/stack');
  const prod = await startStack({
    env: { NODE_ENV: 'production', SECRETS_KEY: Buffer.alloc(32, 7).toString('base64') },
  });
  try {
    t.is((await prod.request('GET', '/v1/graphiql')).status, 404);
    t.is((await prod.request('GET', '/v1/graphiql/graphiql.min.js')).status, 404);
    const ok = await prod.request('POST', '/v1/gql', { body: { query: '{ platforms { id } }' } });
    t.is(ok.status, 200, ok.text);
    const refused = await prod.request('POST', '/v1/gql', {
      body: { query: '{ me { userId } trip(id: "x") { id } }' },
    });
    t.is(refused.body.errors[0].extensions.code, 'UNAUTHENTICATED');
    t.false(/stack|\.js:\d+/.test(refused.text), refused.text);
  } finally {
    await prod.close();
  }
  t.is((await stack().request('GET', '/v1/graphiql')).status, 200);
});

test('refusals graphql-http makes itself get a message and a code: 415, 406, HEAD, PUT, bad GET variables', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const query = encodeURIComponent('{ me { userId } }');
  // A form body reaches graphql-http, which refuses its type.
  const form = await s.request('POST', '/v1/gql', {
    token: user.token,
    rawBody: 'query=%7Bme%7BuserId%7D%7D',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  t.is(form.status, 415);
  t.is(form.body.errors[0].extensions.code, 'UNSUPPORTED_MEDIA_TYPE');
  t.regex(form.body.errors[0].message, /application\/x-www-form-urlencoded/);
  // Any other type is refused before it is read, with the same hint: JSON, not a form.
  const text = await s.request('POST', '/v1/gql', {
    token: user.token,
    rawBody: '{ me { userId } }',
    headers: { 'content-type': 'text/plain' },
  });
  t.is(text.status, 415);
  t.is(text.body.errors[0].extensions.code, 'UNSUPPORTED_MEDIA_TYPE');
  t.regex(text.body.errors[0].message, /send the body as application\/json \(UTF-8\)$/);
  const csv = await s.request('GET', `/v1/gql?query=${query}`, { token: user.token, headers: { accept: 'text/csv' } });
  t.is(csv.status, 406);
  t.deepEqual(csv.body.errors[0].extensions, { code: 'NOT_ACCEPTABLE', status: 406 });
  t.regex(csv.body.errors[0].message, /text\/csv/);
  // HEAD answers as GET does, without a body.
  const head = await fetch(`${s.url}/v1/gql?query=${query}`, {
    method: 'HEAD',
    headers: { authorization: `Bearer ${user.token}` },
  });
  t.is(head.status, 200);
  t.is(await head.text(), '');
  const put = await s.request('PUT', '/v1/gql', { token: user.token, body: { query: '{ me { userId } }' } });
  t.is(put.status, 405);
  t.deepEqual(put.body.errors[0].extensions, { code: 'METHOD_NOT_ALLOWED', status: 405 });
  for (const name of ['variables', 'extensions']) {
    const bad = await s.request('GET', `/v1/gql?query=${query}&${name}=abc`, { token: user.token });
    t.is(bad.status, 400, bad.text);
    t.is(bad.body.errors[0].message, `${name}: must be a JSON object`);
  }
  const fine = await s.request('GET', `/v1/gql?query=${query}&variables=${encodeURIComponent('{}')}`, {
    token: user.token,
  });
  t.is(fine.body.data.me.userId, user.id);
});

test('each GraphQL list pages by the default of its REST twin', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const lists: Array<[string, string]> = [
    ['devices', '/v1/devices'],
    ['geofences', '/v1/geofences'],
    ['locations', '/v1/locations'],
    ['trips', '/v1/trips'],
    ['users', '/v1/users'],
  ];
  const query = `{ ${lists.map(([f]) => `${f} { pagination { limit } }`).join(' ')} }`;
  const g = await s.request('POST', '/v1/gql', { token: admin.token, body: { query } });
  t.is(g.status, 200, g.text);
  t.falsy(g.body.errors, g.text);
  const defaults: Record<string, number> = {};
  for (const [field, path] of lists) {
    const rest = await s.request('GET', path, { token: admin.token });
    t.is(rest.status, 200, rest.text);
    t.is(g.body.data[field].pagination.limit, rest.body.pagination.limit, field);
    defaults[field] = rest.body.pagination.limit;
  }
  // Spec §8: devices, geofences and locations 10; trips and users 20.
  t.deepEqual(defaults, { devices: 10, geofences: 10, locations: 10, trips: 20, users: 20 });
});
