import knex, { Knex } from 'knex';
import { Model } from 'objection';
import pg from 'pg';
import path from 'node:path';
import type { Config } from './config';

// COUNT(*) and BIGINT come back as strings by default; our counts fit in a double.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));
// NUMERIC columns (weights, distances) are plain numbers in the API.
pg.types.setTypeParser(1700, (v) => Number.parseFloat(v));

/** Where the compiled knex migrations live (dist/migrations). */
export const migrationsDirectory = path.resolve(__dirname, '..', 'migrations');

/** A knex instance for the configured database, bound to Objection's models. */
export function createDb(config: Config, opts: { poolMax?: number; bindModels?: boolean } = {}): Knex {
  const db = knex({
    client: 'pg',
    connection: config.databaseUrl,
    pool: { min: 0, max: opts.poolMax ?? config.databasePoolMax },
    migrations: { directory: migrationsDirectory, loadExtensions: ['.js'], tableName: 'knex_migrations' },
  });
  if (opts.bindModels !== false) Model.knex(db);
  return db;
}

/** Runs every pending migration; returns the names applied. */
export async function migrate(db: Knex): Promise<string[]> {
  const [, applied] = await db.migrate.latest();
  return applied as string[];
}
