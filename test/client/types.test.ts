import test from 'ava';
import { readFileSync } from 'node:fs';
import type Koa from 'koa';
import { createApp } from '../../api/app';
import { buildGraphqlSchema } from '../../api/graphql';
import { openApiDocument } from '../../api/openapiSpec';
import type { ApiServices } from '../../api/services';
import { OPERATIONS_FILE, renderOperations } from '../../scripts/clientTypes';
import { TypedApiClient } from '../../shared/client';
import { OPERATIONS } from '../../shared/client/operations';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('shared/client/operations.ts is the render of the current OpenAPI document (npm run client:types)', (t) => {
  const doc = openApiDocument(stack().api.services.version);
  t.is(readFileSync(OPERATIONS_FILE, 'utf8'), renderOperations(doc));
});

test('the client offers exactly the operations of the production service (no GraphiQL)', async (t) => {
  // The production application's router, read from its layers (as test/docs/openapi.test.ts does).
  const services = stack().api.services;
  const production = { ...services, config: { ...services.config, env: 'production' } } as ApiServices;
  const app = createApp(production, await buildGraphqlSchema()) as unknown as Koa;
  const dispatch = app.middleware.find((m) => (m as unknown as { router?: unknown }).router) as unknown as {
    router: { stack: Array<{ path: string | RegExp; methods: string[] }> };
  };
  const routes = new Set<string>();
  for (const layer of dispatch.router.stack)
    for (const m of layer.methods) if (m !== 'HEAD') routes.add(`${m.toLowerCase()} ${String(layer.path)}`);
  const offered = Object.values(OPERATIONS).map(([method, path]) => `${method} ${path}`);
  t.deepEqual(
    offered.filter((o) => !routes.has(o)),
    [],
    'operations production answers 404',
  );
  t.deepEqual(
    [...routes].filter((r) => !offered.includes(r)),
    [],
    'production routes the client lacks',
  );
});

test('typed calls fill the path and type the answer', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { username: 'typed' });
  const client = new TypedApiClient({ baseUrl: s.url });
  const r = await client.call('get_v1_users_id', { auth: { userToken: user.token }, params: { id: user.id } });
  t.is(r.status, 200);
  if (!r.ok) return t.fail(r.text);
  // Typed: once ok, r.body.data.username is a string per the User schema.
  const username: string = r.body.data.username;
  t.is(username, 'typed');
  const none = await client.call('get_v1_users_id', { auth: undefined as never, params: { id: user.id } });
  t.is(none.status, 401);
  t.true(none.notSent);
});

test('a typed call that cannot be made rejects instead of throwing: a path parameter missing, nothing sent', async (t) => {
  let sent = 0;
  const client = new TypedApiClient({
    baseUrl: stack().url,
    fetch: (...a) => {
      sent++;
      return fetch(...a);
    },
  });
  let pending: Promise<unknown> | undefined;
  t.notThrows(() => {
    pending = client.call('get_v1_users_id', { auth: { anonymous: true } });
  });
  await t.throwsAsync(pending!, { message: 'path parameter id missing for /v1/users/:id' });
  t.is(sent, 0);
});
