import test from 'ava';
import type { Knex } from 'knex';
import { loadConfig } from '../../shared/config';
import { createDb, transaction } from '../../shared/db';
import { statementName } from '../../shared/preparedStatements';
import { createTestDatabase } from '../helpers/db';

let db: Knex;
let drop: () => Promise<void>;

test.before(async () => {
  const made = await createTestDatabase();
  drop = made.drop;
  // One connection: the session's prepared statements are the ones every query below used.
  db = createDb(loadConfig({ DATABASE_URL: made.url }), { poolMax: 1, bindModels: false });
  await db.raw('CREATE TABLE prep_probe (id int PRIMARY KEY, label text)');
  await db('prep_probe').insert([
    { id: 1, label: 'one' },
    { id: 2, label: 'two' },
  ]);
});

test.after.always(async () => {
  await db?.destroy();
  await drop?.();
});

const prepared = async (): Promise<string[]> =>
  (await db.raw('SELECT statement FROM pg_prepared_statements')).rows.map((r: { statement: string }) => r.statement);

test.serial('builder queries run as one named prepared statement per SQL text', async (t) => {
  const a = await db('prep_probe').where('id', 1).first('label');
  const b = await db('prep_probe').where('id', 2).first('label');
  t.deepEqual([a.label, b.label], ['one', 'two']);
  const texts = (await prepared()).filter((s) => s.includes('prep_probe') && s.includes('"id" = $1'));
  // Two executions with different values, one statement on the connection.
  t.is(texts.length, 1);
  t.truthy(statementName('select "label" from "prep_probe" where "id" = ? limit ?'));
});

test.serial('writes and transactions prepare too; results are unchanged', async (t) => {
  const rows = await transaction(db, async (trx) => {
    await trx('prep_probe').insert({ id: 3, label: 'three' });
    return trx('prep_probe').where('id', '>=', 2).orderBy('id').update({ label: 'x' }, ['id']);
  });
  t.deepEqual(
    rows.map((r: { id: number }) => r.id),
    [2, 3],
  );
  const texts = await prepared();
  t.true(texts.some((s) => /^insert into "prep_probe"/.test(s)));
  t.true(texts.some((s) => /^update "prep_probe"/.test(s)));
});

test.serial('DDL and several statements in one text stay unnamed', async (t) => {
  t.is(statementName('create index on prep_probe (label)'), undefined);
  t.is(statementName('select 1; select 2'), undefined);
  t.is(statementName(`select '${'x'.repeat(20_000)}'`), undefined);
  const before = (await prepared()).length;
  await db.raw('select 1 as a; select 2 as b');
  t.is((await prepared()).length, before);
});

test.serial('a column added while the process runs: the next SELECT * answers the new shape', async (t) => {
  const first = await db('prep_probe').where('id', 1).select('*');
  t.deepEqual(Object.keys(first[0]).sort(), ['id', 'label']);
  await db.raw("ALTER TABLE prep_probe ADD COLUMN extra text DEFAULT 'e'");
  // The statement prepared above now has a stale result type (0A000); the query is sent again.
  const after = await db('prep_probe').where('id', 1).select('*');
  t.deepEqual(Object.keys(after[0]).sort(), ['extra', 'id', 'label']);
  t.is(after[0].extra, 'e');
});

test.serial('a query that names its own statement keeps the name', async (t) => {
  await db('prep_probe').where('id', 2).first('id').options({ name: 'my_own_name' });
  const names = (await db.raw('SELECT name FROM pg_prepared_statements')).rows.map((r: { name: string }) => r.name);
  t.true(names.includes('my_own_name'));
});
