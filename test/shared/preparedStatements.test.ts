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

test.serial('a pattern match is planned for its pattern: unnamed', async (t) => {
  t.is(statementName('select * from "prep_probe" where lower("label") like lower(?)'), undefined);
  t.is(statementName('select * from "prep_probe" where "label" ILIKE ?'), undefined);
  // A column merely named like the keyword does not count.
  t.truthy(statementName('select "likes", "unlike_count" from "prep_probe"'));
  const all = (await db('prep_probe').pluck('id')).sort();
  const before = (await prepared()).length;
  for (let i = 0; i < 7; i++)
    t.deepEqual((await db('prep_probe').whereRaw('coalesce(label, ?) like ?', ['', '%']).pluck('id')).sort(), all);
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

test.serial(
  'a large id array is planned for its values, not by a generic plan cached while the table was small',
  async (t) => {
    // No autovacuum: nothing analyzes the table between the two phases below (as after a bulk import).
    await db.raw('CREATE TABLE plan_probe (id uuid PRIMARY KEY) WITH (autovacuum_enabled = false)');
    await db.raw('INSERT INTO plan_probe SELECT gen_random_uuid() FROM generate_series(1, 3)');
    await db.raw('ANALYZE plan_probe');
    const lookup = (ids: string[]) => db('plan_probe').whereRaw('id = ANY(?::uuid[])', [ids]).select('id');
    const small: string[] = (await db('plan_probe').select('id')).map((r: { id: string }) => r.id);
    // Enough executions for PostgreSQL to settle on a generic plan: a scan of a one-page table.
    for (let i = 0; i < 8; i++) t.is((await lookup(small)).length, 3);
    t.true((await prepared()).some((s) => s.includes('plan_probe') && s.includes('ANY')));
    await db.raw('INSERT INTO plan_probe SELECT gen_random_uuid() FROM generate_series(1, 60000)');
    const all: string[] = (await db('plan_probe').select('id')).map((r: { id: string }) => r.id);
    // That cached plan would compare each of the 60,003 rows with each of the 60,003 ids: minutes.
    await db.raw("SET statement_timeout = '5s'");
    try {
      t.is((await lookup(all)).length, all.length);
    } finally {
      await db.raw('RESET statement_timeout');
    }
  },
);
