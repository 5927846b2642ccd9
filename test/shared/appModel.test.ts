import test from 'ava';
import { randomUUID } from 'node:crypto';
import { HttpError } from '../../shared/errors';
import { deleteById, insertRow, patchById, patchLoaded } from '../../shared/models/AppModel';
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

test.serial('patchById writes and returns the row as patchAndFetchById does, in one statement', async (t) => {
  const db = stack().db;
  const id = `role_pb_${randomUUID().slice(0, 8)}`;
  const inserted = await Role.query(db).insertAndFetch({
    id,
    name: `Fast ${id}`,
    description: 'first',
    is_system: false,
  });
  const viaObjection = await Role.query(db).patchAndFetchById(id, { description: 'second' });
  const fast = await statementsOn('roles', () =>
    patchById(Role, db, id, { requires_two_factor: true, name: `Fast ${id}`, description: 'third' }).then((r) => r!),
  );
  t.is(fast.sql.length, 1);
  t.regex(fast.sql[0], /^update "roles" set .* returning \*$/i);
  t.true(fast.result instanceof Role);
  t.is(fast.result.description, 'third');
  t.is(fast.result.requires_two_factor, true);
  t.is(fast.result.name, `Fast ${id}`, 'columns the patch did not name come back');
  t.true(fast.result.updated_at! > viaObjection.updated_at!, 'the update hook still runs');
  t.deepEqual(Object.keys(fast.result.toJSON()).sort(), Object.keys(viaObjection.toJSON()).sort());
  t.is((await Role.query(db).findById(id))?.description, 'third');
  // Undefined fields are left alone; the same shape reuses its statement text.
  const again = (await patchById(Role, db, id, { description: 'fourth', name: undefined }))!;
  t.is(again.name, `Fast ${id}`);
  // No such row: undefined, as objection answers.
  t.is((await patchById(Role, db, 'role_nope', { description: 'x' })) as Role | undefined, undefined);
  // Raw SQL in a patch goes through objection, which inlines it.
  const raw = (await patchById(Role, db, id, { description: db.raw("'from sql'") as unknown as string }))!;
  t.is(raw.description, 'from sql');
  t.true(inserted.created_at! <= raw.updated_at!);
  await Role.query(db).deleteById(id);
});

test.serial('patchById formats and parses JSON attributes', async (t) => {
  const db = stack().db;
  const key = await ApiKey.query(db).insertAndFetch({
    name: 'fast patch',
    key_hash: randomUUID(),
    key_prefix: 'sk_fastpatch',
    scopes: ['gps:read'],
    is_active: true,
    is_system: false,
  });
  const patched = (await patchById(ApiKey, db, key.id, { scopes: ['gps:read', 'trips:write'], is_active: false }))!;
  t.deepEqual(patched.scopes, ['gps:read', 'trips:write']);
  t.is(patched.is_active, false);
  const read = await ApiKey.query(db).findById(key.id);
  t.deepEqual(patched.toJSON(), read!.toJSON());
  await ApiKey.query(db).deleteById(key.id);
});

test.serial('insertRow writes every value to its own column, whatever the order of the fields', async (t) => {
  const db = stack().db;
  const expires = new Date(Date.now() + 86_400_000);
  const hash = randomUUID();
  // Not in alphabetical order: knex sorts an insert's columns, the values must follow them.
  const { sql, result } = await statementsOn('api_keys', () =>
    insertRow(ApiKey, db, {
      scopes: ['gps:read'],
      name: 'fast insert',
      key_prefix: 'sk_fastins',
      is_system: false,
      key_hash: hash,
      expires_at: expires,
      description: 'described',
      is_active: true,
    }),
  );
  t.is(sql.length, 1);
  t.regex(sql[0], /^insert into "api_keys" .* returning \*$/i);
  t.true(result instanceof ApiKey);
  t.is(result.name, 'fast insert');
  t.is(result.description, 'described');
  t.is(result.key_hash, hash);
  t.is(result.key_prefix, 'sk_fastins');
  t.is(result.expires_at!.getTime(), expires.getTime());
  t.deepEqual(result.scopes, ['gps:read']);
  t.true(result.created_at instanceof Date, 'columns the insert did not name come back');
  const read = await ApiKey.query(db).findById(result.id);
  t.deepEqual(result.toJSON(), read!.toJSON());
  await ApiKey.query(db).deleteById(result.id);
});

test.serial(
  'patchLoaded patches the row a caller loaded, 404 once it is gone; deleteById counts what it deleted',
  async (t) => {
    const db = stack().db;
    const id = `role_pl_${randomUUID().slice(0, 8)}`;
    const loaded = await insertRow(Role, db, { id, name: `Loaded ${id}`, description: 'first', is_system: false });
    const patched = await patchLoaded(loaded, db, { description: 'second' }, 'role');
    t.true(patched instanceof Role);
    t.is(patched.description, 'second');
    t.is(patched.name, `Loaded ${id}`);
    const deleted = await statementsOn('roles', () => deleteById(Role, db, id));
    t.is(deleted.result, 1);
    t.is(deleted.sql.length, 1);
    t.regex(deleted.sql[0], /^delete from "roles" where "id" = /i);
    t.is(await deleteById(Role, db, id), 0);
    const gone = await t.throwsAsync(() => patchLoaded(loaded, db, { description: 'third' }, 'role'));
    t.is((gone as HttpError).status, 404);
    t.is(gone!.message, 'role not found');
  },
);
