import { loadConfig } from '../../shared/config';
import { createDb, migrate } from '../../shared/db';
import { seed } from '../../shared/seed';
import { adminKnex, testDbSettings } from './db';

/**
 * Run once before the suite: drops leftovers of earlier runs, then builds the template database
 * (migrated and seeded) that every test file copies.
 */
async function main(): Promise<void> {
  const s = testDbSettings();
  const admin = adminKnex();
  try {
    const stale = await admin.raw("SELECT datname FROM pg_database WHERE datname LIKE ? OR datname = ?", [`${s.baseName}_t_%`, s.template]);
    for (const row of stale.rows as Array<{ datname: string }>) {
      await admin.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [row.datname]);
    }
    await admin.raw('CREATE DATABASE ??', [s.template]);
  } finally {
    await admin.destroy();
  }
  const url = new URL(s.base.toString());
  url.pathname = `/${s.template}`;
  const db = createDb(loadConfig({ DATABASE_URL: url.toString() }), { poolMax: 1 });
  try {
    const applied = await migrate(db);
    const report = await seed(db);
    process.stdout.write(`[test] template ${s.template}: ${applied.length} migrations, ${report.roles} roles, ${report.permissions} permissions\n`);
  } finally {
    await db.destroy();
  }
}

main().catch((err) => {
  process.stderr.write(`test preparation failed: ${err?.stack ?? err}\n`);
  process.exit(1);
});
