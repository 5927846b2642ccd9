import knex, { Knex } from 'knex';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { migrationsConfig } from '../../shared/migrations';

/**
 * Test databases are per run: `<db>_t_<run id>_tpl` is the run's migrated, seeded template and
 * `<db>_t_<run id>_<random>` one copy per test file, so two runs on one machine (two checkouts, the
 * same DATABASE_URL) never drop each other's databases. The run id comes from TEST_RUN_ID
 * (scripts/test.sh sets it) or, when that is unset, from the file prepare.ts writes.
 */
const RUN_ID_PATTERN = /^[a-z0-9]{1,24}$/;

/** `.run/test-run-id` at the repository root (gitignored): the run id when TEST_RUN_ID is unset. */
export const RUN_ID_FILE = path.resolve(__dirname, '../../../.run/test-run-id');

/** A fresh run id: base36 seconds and a random part, short enough for 63-character database names. */
export function newRunId(): string {
  return Math.floor(Date.now() / 1000).toString(36) + randomBytes(3).toString('hex');
}

/** The current run's id: TEST_RUN_ID, else the one prepare.ts wrote; throws when there is neither. */
export function testRunId(): string {
  const id = process.env.TEST_RUN_ID || (existsSync(RUN_ID_FILE) ? readFileSync(RUN_ID_FILE, 'utf8').trim() : '');
  if (!id) throw new Error('no test run: run `node dist/test/helpers/prepare.js` first (or set TEST_RUN_ID)');
  if (!RUN_ID_PATTERN.test(id)) throw new Error(`TEST_RUN_ID must be 1-24 lowercase letters or digits, got "${id}"`);
  return id;
}

/** Base URL of the test server, the base database name, and the names of a run's databases. */
export function testDbSettings(runId = testRunId()) {
  const base = new URL(process.env.DATABASE_URL || 'postgres://postgres:postgres@127.0.0.1:5432/service');
  const baseName = decodeURIComponent(base.pathname.slice(1)) || 'service';
  const admin = new URL(base.toString());
  admin.pathname = '/postgres';
  const runPrefix = `${baseName}_t_${runId}_`;
  return { base, baseName, runId, runPrefix, template: `${runPrefix}tpl`, adminUrl: admin.toString() };
}

export function adminKnex(): Knex {
  const admin = new URL(process.env.DATABASE_URL || 'postgres://postgres:postgres@127.0.0.1:5432/service');
  admin.pathname = '/postgres';
  return knex({ client: 'pg', connection: admin.toString(), pool: { min: 0, max: 1 } });
}

const STAMP = 'test database created ';

/** When a stamped test database was created (from its comment), or null when it carries no stamp. */
export function stampedAt(comment: string | null): Date | null {
  if (!comment?.startsWith(STAMP)) return null;
  const at = new Date(comment.slice(STAMP.length));
  return Number.isNaN(at.getTime()) ? null : at;
}

/**
 * Stamps a test database with its creation time (a database comment), so a later run can tell a
 * leftover of a crashed run (old) from a database a concurrent run is using (young).
 */
export async function stampTestDatabase(admin: Knex, name: string): Promise<void> {
  // COMMENT takes no bind parameters; the ISO date holds no quote.
  await admin.raw(`COMMENT ON DATABASE ?? IS '${STAMP}${new Date().toISOString()}'`, [name]);
}

/** Creates a fresh database for one test file by copying the run's migrated, seeded template. */
export async function createTestDatabase(): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const s = testDbSettings();
  const name = `${s.runPrefix}${randomBytes(5).toString('hex')}`;
  const admin = adminKnex();
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.raw('CREATE DATABASE ?? TEMPLATE ??', [name, s.template]);
        break;
      } catch (err) {
        // Two files copying the template at the same instant can collide; retry briefly.
        if (attempt >= 20 || !/being accessed|already exists/.test((err as Error).message)) throw err;
        await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
      }
    }
    await stampTestDatabase(admin, name);
  } finally {
    await admin.destroy();
  }
  const url = new URL(s.base.toString());
  url.pathname = `/${name}`;
  // Migrations added since the template was prepared are applied here, so the copy is always current.
  const { createDb, migrate } = await import('../../shared/db');
  const { loadConfig } = await import('../../shared/config');
  const db = createDb(loadConfig({ DATABASE_URL: url.toString() }), { poolMax: 1, bindModels: false });
  try {
    await migrate(db);
  } finally {
    await db.destroy();
  }
  return {
    url: url.toString(),
    name,
    async drop() {
      const a = adminKnex();
      try {
        await a.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
      } finally {
        await a.destroy();
      }
    },
  };
}

/**
 * A knex of the database at `url` that runs the migrations in `dir` (the repository's compiled
 * ones by default), with a small pool of its own: for tests that migrate a database step by step.
 */
export function migratingKnex(url: string, opts: { dir?: string; poolMax?: number } = {}): Knex {
  return knex({
    client: 'pg',
    connection: url,
    pool: { min: 0, max: opts.poolMax ?? 1 },
    migrations: migrationsConfig(opts.dir ?? path.resolve(__dirname, '../../migrations')),
  });
}
