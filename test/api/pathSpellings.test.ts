import test from 'ava';
import { createUser } from '../helpers/factories';
import { rawRequest } from '../helpers/rawHttp';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('GraphQL answers refusals in its own format in every spelling the router serves it in', async (t) => {
  const s = stack();
  for (const path of ['/v1/gql', '/V1/GQL', '/v1/gql/']) {
    const r = await s.request('POST', path, { token: 'not-a-credential', body: { query: '{ me { id } }' } });
    t.is(r.status, 401, path);
    t.is(r.body.errors?.[0]?.extensions?.code, 'UNAUTHENTICATED', `${path}: ${JSON.stringify(r.body)}`);
    t.is(r.body.error, undefined, path);
  }
});

test('the system key is allowed on its routes in every spelling the router serves them in', async (t) => {
  const s = stack();
  for (const path of ['/V1/GQL', '/v1/gql/']) {
    // fetch, not s.request: these spellings are not the OpenAPI document's.
    const r = await fetch(`${s.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.systemKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ me { isSuperAdmin } }' }),
    });
    t.is(r.status, 200, `${path}: ${await r.text()}`);
  }
});

test('exempt paths are exempt in every spelling: no rate-limit headers', async (t) => {
  const s = stack();
  for (const path of ['/V1/HEALTH', '/v1/health/', '/V1/OPENAPI.JSON']) {
    const r = await fetch(`${s.url}${path}`);
    t.is(r.status, 200, path);
    t.is(r.headers.get('x-ratelimit-limit'), null, path);
  }
});

test('two Authorization lines are a 401, whichever of them is good', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  for (const [first, second] of [
    [`Bearer ${user.token}`, 'Bearer nobody'],
    ['Bearer nobody', `Bearer ${user.token}`],
    [`Bearer ${user.token}`, `Bearer ${user.token}`],
  ]) {
    const r = await rawRequest(
      s.api.port,
      `GET /v1/users/me HTTP/1.1\r\nHost: x\r\nAuthorization: ${first}\r\nAuthorization: ${second}\r\nConnection: close\r\n\r\n`,
    );
    t.is(r.status, 401, r.raw);
    t.regex(r.body.message, /one Authorization header/);
  }
  const one = await s.request('GET', '/v1/users/me', { token: user.token });
  t.is(one.status, 200);
});
