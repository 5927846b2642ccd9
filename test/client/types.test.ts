import test from 'ava';
import { readFileSync } from 'node:fs';
import { openApiDocument } from '../../api/openapiSpec';
import { OPERATIONS_FILE, renderOperations } from '../../scripts/clientTypes';
import { TypedApiClient } from '../../shared/client';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('shared/client/operations.ts is the render of the current OpenAPI document (npm run client:types)', (t) => {
  const doc = openApiDocument(stack().api.services.version);
  t.is(readFileSync(OPERATIONS_FILE, 'utf8'), renderOperations(doc));
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
