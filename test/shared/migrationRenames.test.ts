import test from 'ava';
import type { Knex } from 'knex';
import { copyFile, cp, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../shared/config';
import { createDb, migrate } from '../../shared/db';
import { createTestDatabase, migratingKnex } from '../helpers/db';

// An install deployed at 5bf5c4c applied `20261208000000_incremental_trip_stats`, renamed one
// commit later to `20261207000100_incremental_trip_stats` (shared/migrations.ts RENAMED_MIGRATIONS).
const OLD = '20261208000000_incremental_trip_stats.js';
const NEW = '20261207000100_incremental_trip_stats.js';
const DIST_MIGRATIONS = path.resolve(__dirname, '../../migrations');

const names = async (db: Knex): Promise<string[]> => db('knex_migrations').orderBy('id').pluck('name');

/** A migrated test database, with the knex instance migrate() is given in production. */
async function database(t: { teardown(fn: () => Promise<void>): void }) {
  const d = await createTestDatabase();
  const db = createDb(loadConfig({ DATABASE_URL: d.url }), { poolMax: 2, bindModels: false });
  t.teardown(async () => {
    await db.destroy();
    await d.drop();
  });
  return { ...d, db };
}

test('a database that applied the old name of a renamed migration upgrades: the rest is applied, the renamed one is not run again', async (t) => {
  const { db } = await database(t);
  // Back to the schema of 5bf5c4c: the migrations after the renamed one undone, its record under the old name.
  const all = await names(db);
  const later = all.slice(all.indexOf(NEW) + 1);
  t.true(later.length > 0);
  for (let i = 0; i < later.length; i++) await db.migrate.down();
  await db('knex_migrations').where('name', NEW).update({ name: OLD });
  const columns = await db('information_schema.columns')
    .where({ table_name: 'trip_track_stats', column_name: 'appends_only' })
    .first('column_name');
  t.truthy(columns, 'the renamed migration had added its columns');

  const applied = await migrate(db);
  t.deepEqual(applied, later);
  const after = await names(db);
  t.false(after.includes(OLD));
  t.is(after.filter((n) => n === NEW).length, 1);
  t.deepEqual(await migrate(db), []);
});

test('a stale compiled file of an old name left in the migrations directory is not run', async (t) => {
  const { url } = await database(t);
  // What `git pull && npm run build` in place leaves: tsc never deletes the old name's output.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'migrations-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await cp(DIST_MIGRATIONS, dir, { recursive: true });
  await copyFile(path.join(dir, NEW), path.join(dir, OLD));
  const db = migratingKnex(url, { dir, poolMax: 2 });
  t.teardown(() => db.destroy());
  const [, pending] = (await db.migrate.list()) as [unknown, unknown[]];
  t.deepEqual(pending, []);
  t.deepEqual(await migrate(db), []);
  t.false((await names(db)).includes(OLD));
});
