import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../shared/config';
import { createDb, migrate } from '../../shared/db';
import { seed } from '../../shared/seed';
import { adminKnex, newRunId, RUN_ID_FILE, stampedAt, stampTestDatabase, testDbSettings, testRunId } from './db';
import { OPENAPI_CACHE_DIR } from './openapiCheck';
import { deleteKeysWithPrefix, runRedisPrefix } from './stack';

/** A database of another run older than this is a crashed run's leftover (the suite takes minutes). */
const STALE_HOURS = Number(process.env.TEST_STALE_HOURS || 3);

const say = (msg: string) => process.stdout.write(`[test] ${msg}\n`);
const escapeLike = (s: string) => s.replace(/[\\%_]/g, '\\$&');

/**
 * Drops this run's databases, leftovers of runs older than STALE_HOURS (a crashed run's), and those
 * of the earlier naming scheme (`<db>_t_<hex>`, `<db>_test_template`). Databases of other runs that
 * may still be going are left alone, so two runs can share one PostgreSQL server.
 */
async function dropLeftovers(s: ReturnType<typeof testDbSettings>): Promise<void> {
  const admin = adminKnex();
  try {
    const rows: Array<{ datname: string; comment: string | null }> = (
      await admin.raw(
        "SELECT datname, shobj_description(oid, 'pg_database') AS comment FROM pg_database WHERE datname LIKE ? OR datname = ?",
        [`${escapeLike(s.baseName)}\\_t\\_%`, `${s.baseName}_test_template`],
      )
    ).rows;
    const legacy = new RegExp(`^${s.baseName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}_(t_[0-9a-f]{10}|test_template)$`);
    const staleBefore = Date.now() - STALE_HOURS * 3600_000;
    for (const { datname, comment } of rows) {
      const at = stampedAt(comment);
      const drop =
        datname.startsWith(s.runPrefix) || legacy.test(datname) || (at !== null && at.getTime() < staleBefore);
      if (!drop) continue;
      await admin.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [datname]);
    }
  } finally {
    await admin.destroy();
  }
}

/**
 * Run once before the suite: picks the run id (TEST_RUN_ID, else a new one written to
 * .run/test-run-id for the test files), drops leftovers, then builds the run's template database
 * (migrated and seeded) that every test file copies. With `--cleanup` (after the suite) it only drops
 * the run's own databases and stale ones.
 */
async function main(): Promise<void> {
  if (process.argv.includes('--cleanup')) {
    const s = testDbSettings(testRunId());
    await dropLeftovers(s);
    // Keys written after a stack closed (a job a relay enqueued during shutdown) go with the run.
    const keys = await deleteKeysWithPrefix(process.env.REDIS_URL || 'redis://127.0.0.1:6379', runRedisPrefix(s.runId));
    say(`dropped the databases of run ${s.runId}${keys ? ` and ${keys} leftover Redis keys` : ''}`);
    return;
  }
  const runId = process.env.TEST_RUN_ID || newRunId();
  if (!process.env.TEST_RUN_ID) {
    mkdirSync(path.dirname(RUN_ID_FILE), { recursive: true });
    writeFileSync(RUN_ID_FILE, `${runId}\n`);
  }
  const s = testDbSettings(testRunId());
  await dropLeftovers(s);
  // Documents of earlier builds (test/helpers/openapiCheck.ts) are of no further use.
  rmSync(OPENAPI_CACHE_DIR, { recursive: true, force: true });
  const admin = adminKnex();
  try {
    await admin.raw('CREATE DATABASE ??', [s.template]);
    await stampTestDatabase(admin, s.template);
  } finally {
    await admin.destroy();
  }
  const url = new URL(s.base.toString());
  url.pathname = `/${s.template}`;
  const db = createDb(loadConfig({ DATABASE_URL: url.toString() }), { poolMax: 1 });
  try {
    const applied = await migrate(db);
    const report = await seed(db);
    say(
      `run ${runId}, template ${s.template}: ${applied.length} migrations, ${report.roles} roles, ${report.permissions} permissions`,
    );
  } finally {
    await db.destroy();
  }
}

main().catch((err) => {
  process.stderr.write(`test preparation failed: ${err?.stack ?? err}\n`);
  process.exit(1);
});
