import knex, { Knex } from 'knex';
import { randomBytes } from 'node:crypto';

/** Base URL of the test server and the template database name derived from it. */
export function testDbSettings() {
  const base = new URL(process.env.DATABASE_URL || 'postgres://postgres:postgres@127.0.0.1:5432/service');
  const baseName = decodeURIComponent(base.pathname.slice(1)) || 'service';
  const admin = new URL(base.toString());
  admin.pathname = '/postgres';
  return { base, baseName, template: `${baseName}_test_template`, adminUrl: admin.toString() };
}

export function adminKnex(): Knex {
  return knex({ client: 'pg', connection: testDbSettings().adminUrl, pool: { min: 0, max: 1 } });
}

/** Creates a fresh database for one test file by copying the migrated, seeded template. */
export async function createTestDatabase(): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const s = testDbSettings();
  const name = `${s.baseName}_t_${randomBytes(5).toString('hex')}`;
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
