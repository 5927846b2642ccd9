import knex from 'knex';
import type { Knex } from 'knex';
import { loadConfig } from '../shared/config';
import { createDb, migrate } from '../shared/db';
import { seed } from '../shared/seed';

/**
 * A fresh, migrated and seeded database `<base>_<suffix>` for one benchmark run (dropped first if a
 * previous run left it). Returns its URL and an open connection for the benchmark's own fixtures.
 */
export async function freshBenchDatabase(
  suffix: string,
  env: Record<string, string> = {},
): Promise<{ url: string; db: Knex }> {
  const base = new URL(process.env.DATABASE_URL || 'postgres://postgres:postgres@127.0.0.1:5432/service');
  const name = `${base.pathname.slice(1) || 'service'}_${suffix}`;
  const admin = new URL(base.toString());
  admin.pathname = '/postgres';
  const a = knex({ client: 'pg', connection: admin.toString(), pool: { min: 0, max: 1 } });
  await a.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
  await a.raw('CREATE DATABASE ??', [name]);
  await a.destroy();
  base.pathname = `/${name}`;
  const db = createDb(loadConfig({ ...process.env, ...env, DATABASE_URL: base.toString() }), { poolMax: 2 });
  await migrate(db);
  await seed(db);
  return { url: base.toString(), db };
}
