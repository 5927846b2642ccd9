import test from 'ava';
import { randomUUID } from 'node:crypto';
import { ApiKey } from '../../shared/models/ApiKey';
import { Role } from '../../shared/models/Role';
import { useStack } from '../helpers/stack';
import { statementsOn as helperStatementsOn } from '../helpers/statements';

const stack = useStack(test);

const statementsOn = <T>(table: string, fn: () => PromiseLike<T>) => helperStatementsOn(stack().db, table, fn);

test.serial('insertAndFetch, patchAndFetchById and $query().patchAndFetch are one statement each', async (t) => {
  const db = stack().db;
  const id = `role_rt_${randomUUID().slice(0, 8)}`;
  const inserted = await statementsOn('roles', () =>
    Role.query(db).insertAndFetch({ id, name: `Returning ${id}`, description: 'first', is_system: false }),
  );
  t.is(inserted.sql.length, 1);
  t.regex(inserted.sql[0], /returning \*/i);
  t.true(inserted.result instanceof Role);
  t.is(inserted.result.id, id);
  t.true(inserted.result.created_at instanceof Date, 'columns the insert did not name come back');
  t.is(inserted.result.requires_two_factor, false);

  const patched = await statementsOn('roles', () => Role.query(db).patchAndFetchById(id, { description: 'second' }));
  t.is(patched.sql.length, 1);
  t.is(patched.result?.description, 'second');
  t.is(patched.result?.name, `Returning ${id}`);
  t.true(patched.result!.updated_at! > inserted.result.updated_at!, 'the update hook still runs');

  const missing = await statementsOn('roles', () =>
    Role.query(db).patchAndFetchById('role_nope', { description: 'x' }),
  );
  t.is(missing.sql.length, 1);
  t.is(missing.result as Role | undefined, undefined);

  const instance = (await Role.query(db).findById(id))!;
  const viaInstance = await statementsOn('roles', () => instance.$query(db).patchAndFetch({ description: 'third' }));
  t.is(viaInstance.sql.length, 1);
  t.true(viaInstance.result instanceof Role);
  t.is(viaInstance.result.description, 'third');
  t.is(viaInstance.result.id, id);
  t.is((await Role.query(db).findById(id))?.description, 'third');
  await Role.query(db).deleteById(id);
});

test.serial('JSON attributes come back parsed, as from a read', async (t) => {
  const db = stack().db;
  const { result } = await statementsOn('api_keys', () =>
    ApiKey.query(db).insertAndFetch({
      name: 'returning',
      key_hash: randomUUID(),
      key_prefix: 'sk_returning',
      scopes: ['gps:read', 'trips:read'],
      is_active: true,
      is_system: false,
    }),
  );
  t.deepEqual(result.scopes, ['gps:read', 'trips:read']);
  const read = await ApiKey.query(db).findById(result.id);
  t.deepEqual(result.toJSON(), read!.toJSON());
  await ApiKey.query(db).deleteById(result.id);
});
