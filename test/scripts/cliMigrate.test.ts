import test from 'ava';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import knexFactory, { Knex } from 'knex';
import { adminKnex, createTestDatabase, migratingKnex, testDbSettings } from '../helpers/db';

const CLI = path.resolve(__dirname, '../../scripts/cli.js');
const MIGRATIONS = readdirSync(path.resolve(__dirname, '../../migrations'))
  .filter((f) => f.endsWith('.js'))
  .sort();

/** Runs the CLI against `url` without blocking this process (several run at once). */
function cli(url: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'silent' }, encoding: 'utf8', timeout: 90_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

function connect(t: { teardown(fn: () => Promise<void>): void }, url: string): Knex {
  const db = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 1 } });
  t.teardown(() => db.destroy());
  return db;
}

test('migrators started together on a new database all succeed: the later ones wait, each migration is applied once', async (t) => {
  // What N replicas running `npm start` (scripts/start.sh, set -e) do at once.
  const s = testDbSettings();
  const name = `${s.runPrefix}${randomBytes(5).toString('hex')}`;
  const url = new URL(s.base.toString());
  url.pathname = `/${name}`;
  t.teardown(async () => {
    const admin = adminKnex();
    await admin.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]).finally(() => admin.destroy());
  });
  const runs = await Promise.all([1, 2, 3].map(() => cli(url.toString(), 'migrate')));
  for (const r of runs) t.is(r.code, 0, r.stdout + r.stderr);
  // One applied everything; the others waited for it (or came after it) and had nothing to do.
  t.is(runs.filter((r) => r.stdout.includes(`applied ${MIGRATIONS[0]}`)).length, 1);
  t.is(runs.filter((r) => r.stdout.includes('already up to date')).length, 2);
  const db = connect(t, url.toString());
  const recorded: string[] = await db('knex_migrations').orderBy('name').pluck('name');
  t.deepEqual(recorded, MIGRATIONS);
});

test('a knex migration lock left set by a crashed migrator is freed, with a warning', async (t) => {
  const d = await createTestDatabase();
  t.teardown(() => d.drop());
  const db = connect(t, d.url);
  await db('knex_migrations_lock').update({ is_locked: 1 });
  const r = await cli(d.url, 'migrate');
  t.is(r.code, 0, r.stdout + r.stderr);
  t.regex(r.stdout, /warning: freeing the knex migration lock/);
  t.regex(r.stdout, /already up to date/);
  t.deepEqual(await db('knex_migrations_lock').pluck('is_locked'), [0]);
});

/**
 * The schema as text: columns, constraints, indexes, triggers and functions of the public schema,
 * sorted. Equal texts mean the same schema, whatever migrations made it.
 */
async function schemaText(db: Knex): Promise<string> {
  const { rows } = await db.raw<{ rows: Array<{ text: string }> }>(`
    SELECT string_agg(x, E'\\n' ORDER BY x) AS text FROM (
      SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
        FROM information_schema.columns WHERE table_schema = 'public'
      UNION ALL SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
        FROM pg_constraint WHERE connamespace = 'public'::regnamespace
      UNION ALL SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
      UNION ALL SELECT 'trigger ' || tgrelid::regclass || ' ' || pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal
      UNION ALL SELECT 'function ' || proname || ' ' || md5(prosrc) FROM pg_proc WHERE pronamespace = 'public'::regnamespace
    ) s(x)`);
  return rows[0].text;
}

test('migrate-rollback undoes the last batch, prints what it rolled back, and migrate applies it again', async (t) => {
  const d = await createTestDatabase();
  t.teardown(() => d.drop());
  const db = migratingKnex(d.url);
  t.teardown(() => db.destroy());
  const migrated = await schemaText(db);
  t.regex(migrated, /^constraint api_keys api_keys_pkey PRIMARY KEY \(id\)$/m);
  // A last batch of the newest two migrations: undone, then applied again by one migrate.
  const lastTwo = MIGRATIONS.slice(-2);
  await db.migrate.down();
  await db.migrate.down();
  const m = await cli(d.url, 'migrate');
  t.is(m.code, 0, m.stdout + m.stderr);
  for (const name of lastTwo) t.regex(m.stdout, new RegExp(`applied ${name}`));
  t.is(await schemaText(db), migrated, 'applied again, the schema is what it was');

  const r = await cli(d.url, 'migrate-rollback');
  t.is(r.code, 0, r.stdout + r.stderr);
  t.deepEqual(
    r.stdout.split('\n').filter((l) => l.startsWith('  rolled back ')),
    [...lastTwo].reverse().map((n) => `  rolled back ${n}`),
  );
  t.deepEqual(await db('knex_migrations').whereIn('name', lastTwo).pluck('name'), []);
  const again = await cli(d.url, 'migrate');
  t.is(again.code, 0, again.stdout + again.stderr);
  t.is(await schemaText(db), migrated, 'rolled back and applied again, the schema is what it was');
});

test('migrate refuses a database that is not UTF8, naming its encoding', async (t) => {
  const s = testDbSettings();
  const name = `${s.runPrefix}${randomBytes(5).toString('hex')}`;
  const url = new URL(s.base.toString());
  url.pathname = `/${name}`;
  const admin = adminKnex();
  t.teardown(async () => {
    await admin.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]).finally(() => admin.destroy());
  });
  await admin.raw("CREATE DATABASE ?? ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'", [name]);
  const r = await cli(url.toString(), 'migrate');
  t.is(r.code, 1, r.stdout + r.stderr);
  t.regex(r.stderr, /encoding is SQL_ASCII, not UTF8/);
  const db = connect(t, url.toString());
  t.false((await db.raw("SELECT to_regclass('public.users') AS t")).rows[0].t !== null);
});
