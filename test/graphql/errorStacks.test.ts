import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

/**
 * The errors whose stack (with frames) is formatted while `fn` runs: formatting a stack with
 * source maps costs more than answering a refusal, and refusals have no use for one.
 */
async function formattedStacks<T>(fn: () => Promise<T>): Promise<{ result: T; formatted: string[] }> {
  const original = Error.prepareStackTrace;
  const formatted: string[] = [];
  Error.prepareStackTrace = (err, frames) => {
    if (frames.length) formatted.push(`${err.name}: ${err.message}`);
    return original ? original(err, frames) : String(err);
  };
  try {
    return { result: await fn(), formatted };
  } finally {
    Error.prepareStackTrace = original;
  }
}

test.serial('a refused GraphQL field answers with its location and path, and no stack is formatted', async (t) => {
  const s = stack();
  const query = encodeURIComponent('{ me { userId roles isSuperAdmin } }');
  await s.request('GET', `/v1/gql?query=${query}`); // warm: the first request compiles and caches
  const { result: r, formatted } = await formattedStacks(() => s.request('GET', `/v1/gql?query=${query}`));
  t.is(r.status, 200);
  t.deepEqual(r.body, {
    data: { me: null },
    errors: [
      {
        message: 'authentication required',
        locations: [{ line: 1, column: 3 }],
        path: ['me'],
        extensions: { code: 'UNAUTHENTICATED', status: 401 },
      },
    ],
  });
  t.deepEqual(formatted, []);
});

test.serial('a not-found by id in GraphQL and a REST 404 and 401 format no stack either', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_admin'] });
  const missing = '00000000-0000-4000-8000-000000000000';
  const gql = () =>
    s.request('POST', '/v1/gql', { token: user.token, body: { query: `{ trip(id: "${missing}") { id } }` } });
  await gql();
  const { result, formatted } = await formattedStacks(async () => ({
    gql: await gql(),
    rest: await s.request('GET', `/v1/trips/${missing}`, { token: user.token }),
    anon: await s.request('GET', '/v1/users/me'),
  }));
  t.is(result.gql.body.errors[0].extensions.code, 'NOT_FOUND', result.gql.text);
  t.deepEqual(result.gql.body.errors[0].path, ['trip']);
  t.is(result.rest.status, 404);
  t.is(result.anon.status, 401);
  t.deepEqual(formatted, []);
});
