import type { Knex } from 'knex';
import { readdir } from 'node:fs/promises';
import path from 'node:path';

/** The table knex records applied migrations in. */
export const MIGRATIONS_TABLE = 'knex_migrations';

/**
 * Migrations renamed after a release, old file name → new one, as knex records them. A database
 * that applied the old name has what the new one creates: `migrate()` rewrites its record before
 * knex lists the migrations (knex would otherwise call the directory corrupt), and a compiled file
 * of the old name left in dist/migrations (tsc never deletes an output whose source went away) is
 * not a migration. A rename is added here, never a file renamed without it.
 */
export const RENAMED_MIGRATIONS: Readonly<Record<string, string>> = {
  // Renamed one commit after it was added (5bf5c4c), to run before 20261208000000_retired_key_hashes.
  '20261208000000_incremental_trip_stats.js': '20261207000100_incremental_trip_stats.js',
  // Renamed one commit after it was added (c841395), to run after 20261215000000_used_token_payloads.
  '20261215000000_geofence_event_identity.js': '20261216000000_geofence_event_identity.js',
};

/** A migration file as knex's source hands it around. */
interface MigrationFile {
  file: string;
  directory: string;
}

/**
 * knex's migration source for the compiled migrations (`.js` files of `directory`, sorted by
 * name), leaving out the old names of RENAMED_MIGRATIONS.
 */
export class CompiledMigrations implements Knex.MigrationSource<MigrationFile> {
  constructor(private readonly directory: string) {}

  async getMigrations(): Promise<MigrationFile[]> {
    const files = await readdir(this.directory);
    return files
      .filter((f) => path.extname(f) === '.js' && !Object.hasOwn(RENAMED_MIGRATIONS, f))
      .sort()
      .map((file) => ({ file, directory: this.directory }));
  }

  getMigrationName(migration: MigrationFile): string {
    return migration.file;
  }

  getMigration(migration: MigrationFile): Promise<Knex.Migration> {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return Promise.resolve(require(path.join(migration.directory, migration.file)) as Knex.Migration);
  }
}

/** knex's `migrations` configuration for the compiled migrations of `directory`. */
export function migrationsConfig(directory: string): Knex.MigratorConfig {
  return { tableName: MIGRATIONS_TABLE, migrationSource: new CompiledMigrations(directory) };
}

/**
 * Rewrites the records of renamed migrations (RENAMED_MIGRATIONS) to their new names, when
 * knex_migrations exists. A database that somehow holds both names keeps the new one only.
 */
export async function applyMigrationRenames(db: Knex): Promise<void> {
  if (!(await db.schema.hasTable(MIGRATIONS_TABLE))) return;
  for (const [oldName, newName] of Object.entries(RENAMED_MIGRATIONS)) {
    const hasNew = await db(MIGRATIONS_TABLE).where('name', newName).first('id');
    if (hasNew) await db(MIGRATIONS_TABLE).where('name', oldName).del();
    else await db(MIGRATIONS_TABLE).where('name', oldName).update({ name: newName });
  }
}
