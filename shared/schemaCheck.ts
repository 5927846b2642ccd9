import type { Knex } from 'knex';
import { toHttpError } from './errors';
import type { Logger } from './logger';
import { MIGRATIONS_TABLE, RENAMED_MIGRATIONS } from './migrations';

/** The command that brings the database's schema up to this build. */
export const MIGRATE_COMMAND = 'npm run cli -- migrate';

/** The database's schema lacks migrations of this build: the process does not start. */
export class SchemaBehindError extends Error {
  constructor(readonly pending: string[]) {
    super(
      `the database schema is behind this build (${pending.length} pending migration${pending.length === 1 ? '' : 's'}, ` +
        `from ${pending[0]}): run \`${MIGRATE_COMMAND}\`, then start again`,
    );
    this.name = 'SchemaBehindError';
  }
}

const nameOf = (m: unknown): string =>
  typeof m === 'string' ? m : ((m as { name?: string; file?: string }).name ?? (m as { file: string }).file);

/**
 * The migrations of this build the database has not applied, by name. A database that applied
 * the old name of a renamed migration has it. Migrations recorded but unknown to this build (a
 * newer build migrated the database: an old instance during a rolling reload) are not an error:
 * their changes are additive. Reads only (knex_migrations is not created when missing).
 */
export async function pendingMigrations(db: Knex): Promise<string[]> {
  if (!(await db.schema.hasTable(MIGRATIONS_TABLE))) {
    const source = (db.client.config as { migrations: Knex.MigratorConfig }).migrations.migrationSource!;
    return ((await source.getMigrations([])) as unknown[]).map((m) => source.getMigrationName(m));
  }
  const [completed, pending] = (await db.migrate.list({ disableMigrationsListValidation: true })) as [
    unknown[],
    unknown[],
  ];
  const applied = new Set(completed.map(nameOf));
  for (const [oldName, newName] of Object.entries(RENAMED_MIGRATIONS)) if (applied.has(oldName)) applied.add(newName);
  return pending.map(nameOf).filter((n) => !applied.has(n));
}

/** How often a process that could not check its schema at start tries again (ms). */
export const SCHEMA_RECHECK_MS = 2000;

/**
 * What a process does when the database it could not reach at start comes back with a schema
 * behind this build: the same fatal line as at start, then the process's own drain (its SIGTERM
 * handler), with exit code 1. Serving on would answer "relation does not exist" where the build
 * needs a new table; stopped, the process manager starts it again, and that start refuses as any.
 */
function stopProcess(name: string, logger: Logger): (err: SchemaBehindError) => void {
  return (err) => {
    logger.fatal({ pending: err.pending }, `${name} stopping: ${err.message}`);
    process.exitCode = 1;
    process.kill(process.pid, 'SIGTERM');
  };
}

/**
 * Run once at start by the api, realtime and workers: a schema behind the build throws
 * SchemaBehindError (a fatal line naming MIGRATE_COMMAND, rather than "relation does not exist"
 * from the first query that needs a new table). A database that cannot be reached is not checked
 * then: the process starts anyway and answers 503 where it needs the database, as before, and
 * checks again every SCHEMA_RECHECK_MS until the database answers; a schema found behind then stops
 * the process (`onLaterBehind`, by default stopProcess). Returns the function that ends the
 * re-checks (called by the process's close).
 */
export async function checkSchemaAtStart(
  db: Knex,
  logger: Logger,
  opts: { name: string; onLaterBehind?: (err: SchemaBehindError) => void; recheckMs?: number },
): Promise<() => void> {
  try {
    const pending = await pendingMigrations(db);
    if (pending.length) throw new SchemaBehindError(pending);
    return () => undefined;
  } catch (err) {
    if (toHttpError(err)?.status !== 503) throw err;
    logger.warn({ err: (err as Error).message }, 'database not reachable at start: schema version not checked');
  }
  const onLaterBehind = opts.onLaterBehind ?? stopProcess(opts.name, logger);
  let checking = false;
  const timer = setInterval(() => {
    if (checking) return;
    checking = true;
    pendingMigrations(db).then(
      (pending) => {
        clearInterval(timer);
        if (pending.length) onLaterBehind(new SchemaBehindError(pending));
        else logger.info('database reachable: schema version checked, up to date');
      },
      (err: unknown) => {
        checking = false;
        if (toHttpError(err)?.status === 503) return;
        // Not an outage (the pool closed by a drain, a permission): checked no more, and said so.
        clearInterval(timer);
        logger.warn({ err: (err as Error).message }, 'schema version not checked');
      },
    );
  }, opts.recheckMs ?? SCHEMA_RECHECK_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * Tables the service deletes from or rewrites all the time (the side-effect outbox, sessions, the
 * row counters, the guessing counters, table versions, the mail outbox): without autovacuum their
 * dead rows are never reclaimed, and the outbox relay's claim walks ever more of them.
 */
const CHURNING_TABLES = [
  'side_effect_outbox',
  'sessions',
  'row_counters',
  'attempt_counters',
  'table_versions',
  'email_outbox',
];

/**
 * Warns (once, at the workers' start) when the database does not vacuum what the service churns:
 * autovacuum or track_counts off for the server, or autovacuum_enabled off for one of
 * CHURNING_TABLES. Seen on a server with autovacuum off: the empty outbox held 29,755 dead rows
 * (7.2 MB) after 35 minutes. Answers what it warned about; a database it cannot read is not checked.
 */
export async function warnOnVacuumSettings(db: Knex, logger: Logger): Promise<string[]> {
  let row: { autovacuum: boolean; track_counts: boolean; off: string[] };
  try {
    const { rows } = await db.raw<{ rows: Array<typeof row> }>(
      `SELECT current_setting('autovacuum') = 'on' AS autovacuum,
              current_setting('track_counts') = 'on' AS track_counts,
              ARRAY(SELECT c.relname::text FROM pg_class c
                     WHERE c.relname = ANY(?::text[]) AND c.relkind = 'r' AND pg_table_is_visible(c.oid)
                       AND EXISTS (SELECT 1 FROM pg_options_to_table(c.reloptions) o
                                    WHERE o.option_name = 'autovacuum_enabled' AND NOT o.option_value::boolean)
                     ORDER BY c.relname) AS off`,
      [CHURNING_TABLES],
    );
    row = rows[0]!;
  } catch {
    return [];
  }
  const problems = [
    ...(row.autovacuum ? [] : ['autovacuum is off']),
    ...(row.track_counts ? [] : ['track_counts is off (autovacuum needs it)']),
    ...row.off.map((t) => `autovacuum_enabled is false on ${t}`),
  ];
  if (problems.length)
    logger.warn(
      { problems, tables: CHURNING_TABLES },
      `the database does not vacuum the tables the service churns (${problems.join('; ')}): their dead rows pile up and the outbox relay slows; turn autovacuum on`,
    );
  return problems;
}
