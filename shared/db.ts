import knex, { Knex } from 'knex';
import { Model } from 'objection';
import pg from 'pg';
import path from 'node:path';
import type { Config } from './config';
import { parseTimestamptz } from './pgDates';
import { preparingPgClient } from './preparedStatements';

// COUNT(*) and BIGINT come back as strings by default; our counts fit in a double.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));
// NUMERIC columns (weights, distances) are plain numbers in the API.
pg.types.setTypeParser(1700, (v) => Number.parseFloat(v));
// timestamptz: the same Dates as pg's parser, by char codes instead of four regexps (shared/pgDates.ts).
pg.types.setTypeParser(pg.types.builtins.TIMESTAMPTZ, parseTimestamptz);

/** Where the compiled knex migrations live (dist/migrations). */
const migrationsDirectory = path.resolve(__dirname, '..', 'migrations');

/** A knex instance for the configured database, bound to Objection's models. */
export function createDb(config: Config, opts: { poolMax?: number; bindModels?: boolean } = {}): Knex {
  const db = knex({
    // knex's pg client with every query sent as a named prepared statement (shared/preparedStatements.ts).
    client: preparingPgClient(),
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

type AfterCommit = () => unknown;

/** Hooks of the transactions opened by `transaction()`, run once each commits. */
const afterCommitHooks = new WeakMap<Knex.Transaction, AfterCommit[]>();

/** Reports a failed after-commit hook (set by each process to its logger; stderr by default). */
let reportHookFailure: (err: unknown) => void = (err) =>
  process.stderr.write(`after-commit hook failed: ${String(err)}\n`);

export function onAfterCommitFailure(report: (err: unknown) => void): void {
  reportHookFailure = report;
}

/**
 * Runs `work` in a transaction, then the side effects it registered with `afterCommit` (pushes,
 * credential invalidations, enqueues), in order, once the commit succeeded, and awaits them before
 * returning, so a narrowing change has reached every instance when the caller answers. A rollback
 * drops them. A failing hook is reported and does not fail the others or the committed change:
 * effects that must not be lost go through the outbox instead (shared/outbox.ts).
 */
export async function transaction<T>(db: Knex, work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  const hooks: AfterCommit[] = [];
  const result = await db.transaction(async (trx) => {
    afterCommitHooks.set(trx, hooks);
    return work(trx);
  });
  for (const hook of hooks) {
    try {
      await hook();
    } catch (err) {
      reportHookFailure(err);
    }
  }
  return result;
}

/**
 * Registers a side effect to run after `trx` commits (Outline's Event model does the same). `trx`
 * must come from `transaction()`, or be a savepoint inside one.
 */
export function afterCommit(trx: Knex.Transaction, hook: AfterCommit): void {
  let t: Knex.Transaction | undefined = trx;
  while (t && !afterCommitHooks.has(t))
    t = (t as unknown as { parentTransaction?: Knex.Transaction }).parentTransaction;
  const hooks = t && afterCommitHooks.get(t);
  if (!hooks) throw new Error('afterCommit needs a transaction opened with transaction() from shared/db');
  hooks.push(hook);
}
