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

/**
 * Run once at start by the api, realtime and workers: a schema behind the build throws
 * SchemaBehindError (a fatal line naming MIGRATE_COMMAND, rather than "relation does not exist"
 * from the first query that needs a new table). A database that cannot be reached is not checked:
 * the process starts anyway and answers 503 where it needs the database, as before.
 */
export async function checkSchemaAtStart(db: Knex, logger: Logger): Promise<void> {
  let pending: string[];
  try {
    pending = await pendingMigrations(db);
  } catch (err) {
    if (toHttpError(err)?.status !== 503) throw err;
    logger.warn({ err: (err as Error).message }, 'database not reachable at start: schema version not checked');
    return;
  }
  if (pending.length) throw new SchemaBehindError(pending);
}
