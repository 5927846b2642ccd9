import Redis from 'ioredis';
import knex from 'knex';
import type { Knex } from 'knex';
import pg from 'pg';
import { loadConfig } from '../shared/config';
import { createDb, migrate } from '../shared/db';
import { seed } from '../shared/seed';

/**
 * Per database name, the connection holding the lock of the run that uses it (released by
 * dropBenchRun, or by PostgreSQL when the process dies).
 */
const runLocks = new Map<string, pg.Client>();

/**
 * Takes the session advisory lock of the benchmark database `name` on the server of `admin`, so
 * that a second run of the same benchmark fails at once with a clear message instead of dropping
 * the first run's database under it (both would then fail half-way, with "terminating connection
 * due to administrator command").
 */
async function lockBenchDatabase(admin: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  client.on('error', () => undefined);
  const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok', [
    `bench database ${name}`,
  ]);
  if (!rows[0].ok) {
    await client.end();
    throw new Error(
      `another benchmark run is using the database ${name}: wait for it to end, or give this run another DATABASE_URL database name`,
    );
  }
  runLocks.set(name, client);
}

/**
 * A fresh, migrated and seeded database `<base>_<suffix>` for one benchmark run (dropped first if a
 * previous run left it; refused while another run uses it). Returns its URL and an open
 * connection for the benchmark's own fixtures.
 */
export async function freshBenchDatabase(
  suffix: string,
  env: Record<string, string> = {},
): Promise<{ url: string; db: Knex }> {
  const base = new URL(process.env.DATABASE_URL || 'postgres://postgres:postgres@127.0.0.1:5432/service');
  const name = `${base.pathname.slice(1) || 'service'}_${suffix}`;
  const admin = new URL(base.toString());
  admin.pathname = '/postgres';
  await lockBenchDatabase(admin.toString(), name);
  const a = knex({ client: 'pg', connection: admin.toString(), pool: { min: 0, max: 1 } });
  await a.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
  await a.raw('CREATE DATABASE ??', [name]);
  await a.destroy();
  base.pathname = `/${name}`;
  const db = createDb(loadConfig({ ...process.env, ...env, DATABASE_URL: base.toString() }), { poolMax: 2 });
  try {
    await migrate(db);
    await seed(db);
  } catch (err) {
    await db.destroy();
    await dropBenchRun({ url: base.toString() });
    throw err;
  }
  return { url: base.toString(), db };
}

/** `*`, `?`, `[`, `]` and `\` match literally in a SCAN pattern. */
const globLiteral = (s: string) => s.replace(/[*?[\]\\]/g, '\\$&');

/** What one benchmark run creates: its database (`url`) and its Redis key prefix on `redisUrl`. */
export interface BenchRun {
  url?: string;
  redisUrl?: string;
  redisPrefix?: string;
}

/**
 * Removes what one benchmark run left behind: its database `url` (unless KEEP_DB is set, as `1`)
 * and every Redis key under `redisPrefix` on `redisUrl` (queue jobs, caches, leases: most have no
 * expiry, so a fresh random prefix per run would otherwise pile up run after run). Stop every
 * process that uses them first: a child still running would write keys again after the scan.
 * Refuses a database whose name has no `_bench` (never the service's own) and an empty prefix
 * (which would match every key). Best effort: reports what it could not remove and never throws.
 */
export async function dropBenchRun(run: BenchRun): Promise<void> {
  const log = (s: string): void => void process.stderr.write(`${s}\n`);
  if (run.url) {
    const base = new URL(run.url);
    const name = decodeURIComponent(base.pathname.slice(1));
    const lock = runLocks.get(name);
    runLocks.delete(name);
    if (!/_bench/.test(name)) log(`not dropping database ${name}: not a benchmark database`);
    else if (process.env.KEEP_DB && process.env.KEEP_DB !== '0') log(`KEEP_DB: kept database ${name}`);
    else {
      base.pathname = '/postgres';
      const admin = knex({ client: 'pg', connection: base.toString(), pool: { min: 0, max: 1 } });
      try {
        await admin.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
        log(`dropped database ${name}`);
      } catch (err) {
        log(`could not drop database ${name}: ${(err as Error).message}`);
      } finally {
        await admin.destroy();
      }
    }
    await lock?.end().catch(() => undefined);
  }
  if (run.redisPrefix === undefined && run.redisUrl === undefined) return;
  if (!run.redisPrefix) return log('not deleting Redis keys: empty prefix');
  const redis = new Redis(run.redisUrl || process.env.REDIS_URL || 'redis://127.0.0.1:6379', {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
  });
  redis.on('error', () => undefined);
  let deleted = 0;
  try {
    await redis.connect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${globLiteral(run.redisPrefix)}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) deleted += await redis.unlink(...keys);
    } while (cursor !== '0');
    log(`deleted ${deleted} Redis keys under ${run.redisPrefix}`);
  } catch (err) {
    log(`could not delete Redis keys under ${run.redisPrefix}: ${(err as Error).message}`);
  } finally {
    redis.disconnect();
  }
}

/**
 * The end of a benchmark run, made to happen at most once: `stop` (the run's child processes,
 * servers and connections), then dropBenchRun(`run`), even when `stop` failed. Await the result in
 * the benchmark's `finally`. SIGINT (Ctrl-C) runs it too and then exits 130 (a second Ctrl-C exits
 * at once); so does an uncaught exception or unhandled rejection (exit 1), which would otherwise
 * end the process before any `finally` ran. Once it has begun, errors of work still in flight (a
 * request to a stopped child, a query on the dropped database) are expected and not reported.
 */
export function benchCleanup(run: BenchRun, stop: () => Promise<void> = async () => undefined): () => Promise<void> {
  let done: Promise<void> | undefined;
  const once = () =>
    (done ??= (async () => {
      try {
        await stop();
      } catch (err) {
        process.stderr.write(`stopping the run failed: ${(err as Error)?.stack ?? err}\n`);
      }
      await dropBenchRun(run);
    })());
  const endWith = (code: number) => void once().finally(() => process.exit(code));
  process.once('SIGINT', () => {
    process.stderr.write('interrupted: cleaning up (Ctrl-C again to exit at once)\n');
    endWith(130);
  });
  const fatal = (err: unknown) => {
    if (done) return;
    process.stderr.write(`${(err as Error)?.stack ?? err}\n`);
    endWith(1);
  };
  process.on('uncaughtException', fatal);
  process.on('unhandledRejection', fatal);
  return once;
}
