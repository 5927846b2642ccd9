import knex, { Knex } from 'knex';
import { Model } from 'objection';
import pg from 'pg';
import path from 'node:path';
import type { Config } from './config';
import { QUERY_OUTCOME_UNKNOWN, serviceUnavailable, toHttpError } from './errors';
import type { Logger } from './logger';
import { OutageLog } from './outageLog';
import { parseTimestamptz } from './pgDates';
import { preparingPgClient } from './preparedStatements';
import { applyMigrationRenames, MIGRATIONS_TABLE, migrationsConfig } from './migrations';

// COUNT(*) and BIGINT come back as strings by default; our counts fit in a double.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));
// NUMERIC columns (weights, distances) are plain numbers in the API.
pg.types.setTypeParser(1700, (v) => Number.parseFloat(v));
// timestamptz: the same Dates as pg's parser, by char codes instead of four regexps (shared/pgDates.ts).
pg.types.setTypeParser(pg.types.builtins.TIMESTAMPTZ, parseTimestamptz);
// Date parameters travel as UTC text. pg's default writes the process's local time with the offset
// cut to whole minutes, which moves instants of zones with a seconds offset (historic LMT) by up to
// 59 s, and makes what is sent depend on the process's TZ.
pg.defaults.parseInputDatesAsUTC = true;

/** Where the compiled knex migrations live (dist/migrations). */
const migrationsDirectory = path.resolve(__dirname, '..', 'migrations');

const firstLine = (m: unknown) => String(m instanceof Error ? m.message : m).split('\n', 1)[0];

/** knex's warnings of a connection that failed or broke: one per failed acquire and per dropped connection. */
const CONNECTION_WARNING = /^(Connection Error|Acquire connection error): /;

/**
 * How long no database failure may have been seen before an answered statement counts as the end of
 * an outage: while some requests still fail (a pool saturated, connections being replaced) and
 * others are answered, the log says "database reachable again" once, not at every answer.
 */
const DATABASE_QUIET_MS = 1000;

/** The OutageLog a process reports database failures to (requests answered 503, failed jobs…). */
export function databaseOutageLog(logger: Logger): OutageLog {
  return new OutageLog(logger, 'database', { quietMs: DATABASE_QUIET_MS });
}

/** The longest a new connection may take to open: a server that accepts and never answers fails. */
const CONNECT_TIMEOUT_MS = 5000;

/**
 * A knex instance for the configured database, bound to Objection's models. `serving`: the process
 * answers requests (api, realtime): each statement is bounded by DATABASE_REQUEST_TIMEOUT_MS, on
 * the server (statement_timeout, which frees the connection) and on the client (query_timeout,
 * for a server that no longer answers at all), and so is the wait for a pooled connection. Workers
 * and the CLI run long statements (exports, retention, migrations) and are not bounded. With a
 * `logger`, connection failures are folded by `outages`, the process's database OutageLog (one of
 * its own when none is given), which every answered statement tells that the database is back.
 */
export function createDb(
  config: Config,
  opts: {
    poolMax?: number;
    bindModels?: boolean;
    serving?: boolean;
    logger?: Logger;
    outages?: OutageLog;
    /** The process's name (`api`, `workers`, `realtime`, `cli`): pg_stat_activity shows `<name>:<pid>`. */
    name?: string;
  } = {},
): Knex {
  const limit = opts.serving ? config.databaseRequestTimeoutMs : undefined;
  const logger = opts.logger;
  const outages = opts.outages ?? (logger ? databaseOutageLog(logger) : undefined);
  const warn = (m: unknown) => {
    const detail = firstLine(m);
    if (outages && CONNECTION_WARNING.test(detail)) outages.failure('database client warning', detail, { detail });
    else logger?.warn({ detail }, 'database client warning');
  };
  const db = knex({
    // knex and its pool report connection trouble (with stacks, one per failed acquire) through
    // this: the process's structured log, first line only, instead of plain text on stderr. A
    // connection that failed or broke is a database outage: folded by `outages`, like the requests
    // it fails (shared/outageLog.ts).
    ...(logger
      ? {
          log: {
            warn,
            error: (m: unknown) => logger.error({ detail: firstLine(m) }, 'database client error'),
            deprecate: (m: unknown) => logger.debug({ detail: firstLine(m) }, 'database client deprecation'),
            debug: (m: unknown) => logger.debug({ detail: firstLine(m) }, 'database client debug'),
          },
        }
      : {}),
    // knex's pg client with every query sent as a named prepared statement (shared/preparedStatements.ts).
    client: preparingPgClient(),
    connection: {
      connectionString: config.databaseUrl,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      // Which process holds a connection, for an operator reading pg_stat_activity (an
      // application_name in DATABASE_URL wins).
      ...(opts.name ? { application_name: `${opts.name}:${process.pid}` } : {}),
      ...(limit ? { statement_timeout: limit, query_timeout: limit + 1000 } : {}),
    },
    ...(limit ? { acquireConnectionTimeout: limit } : {}),
    pool: { min: 0, max: opts.poolMax ?? config.databasePoolMax },
    migrations: migrationsConfig(migrationsDirectory),
  });
  // Any statement answered ends an outage (once none failed for DATABASE_QUIET_MS).
  if (outages) db.on('query-response', () => outages.answered());
  if (opts.bindModels !== false) Model.knex(db);
  return db;
}

/** The session-level advisory lock one migrator of a database holds (any fixed key; per database). */
const MIGRATOR_LOCK_KEY = 7_264_011_533;
/** How often a waiting migrator tries the advisory lock again. */
const MIGRATOR_LOCK_RETRY_MS = 250;

/** What migrate() says on the way: another migrator it waits for, a stale knex lock it frees. */
export interface MigrateOptions {
  log?: (line: string) => void;
}

/** A raw connection of knex's client (a pg Client), outside the pool. */
interface RawConnection {
  query(text: string, values?: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }>;
}

type RawClient = {
  acquireRawConnection(): Promise<RawConnection>;
  destroyRawConnection(conn: RawConnection): Promise<void>;
};

/**
 * Runs `work` as the only migrator of the database: under a PostgreSQL session-level advisory lock
 * held on a connection of its own, which never opens a transaction nor waits in a statement (migrations build indexes
 * CONCURRENTLY, which waits for every open transaction to end). Several `cli migrate` started at
 * once (replicas running `npm start`) queue here: the later ones wait for the first, then find
 * nothing to do, rather than failing on knex's lock ("Migration table is already locked") or on
 * creating knex's tables twice. The connection is opened with the pool's settings but outside the
 * pool, so a pool of one connection still has it for the migrations. Released in finally (and by
 * PostgreSQL when the connection is lost).
 */
async function asOnlyMigrator<T>(db: Knex, log: (line: string) => void, work: () => Promise<T>): Promise<T> {
  const client = db.client as unknown as RawClient;
  const conn = await client.acquireRawConnection();
  try {
    const tryLock = async () =>
      (await conn.query('SELECT pg_try_advisory_lock($1) AS ok', [MIGRATOR_LOCK_KEY])).rows[0].ok === true;
    if (!(await tryLock())) {
      log('waiting for another migrator to finish…');
      // Tried again and again rather than waited for in one pg_advisory_lock statement: a statement
      // waiting holds a snapshot, and CREATE INDEX CONCURRENTLY in the holder's migrations waits for
      // every older snapshot of the database to go away. The two would wait for each other forever.
      while (!(await tryLock())) await new Promise((r) => setTimeout(r, MIGRATOR_LOCK_RETRY_MS));
    }
    try {
      // Holding the advisory lock, no other migrator runs: a set knex lock is a crashed one's leftover.
      if (await db.schema.hasTable(`${MIGRATIONS_TABLE}_lock`)) {
        const locked = await db(`${MIGRATIONS_TABLE}_lock`).where('is_locked', 1).first('is_locked');
        if (locked) {
          log('warning: freeing the knex migration lock left set by a migrator that stopped mid-way');
          await db.migrate.forceFreeMigrationsLock();
        }
      }
      // Records of renamed migrations under their new names before knex lists them (shared/migrations.ts).
      await applyMigrationRenames(db);
      return await work();
    } finally {
      await conn.query('SELECT pg_advisory_unlock($1)', [MIGRATOR_LOCK_KEY]).catch(() => undefined);
    }
  } finally {
    await client.destroyRawConnection(conn).catch(() => undefined);
  }
}

/**
 * Runs every pending migration; returns the names applied. One migrator at a time per database
 * (asOnlyMigrator); records of renamed migrations are rewritten to their new names first.
 */
export async function migrate(db: Knex, opts: MigrateOptions = {}): Promise<string[]> {
  return asOnlyMigrator(db, opts.log ?? (() => undefined), async () => {
    const [, applied] = await db.migrate.latest();
    return applied as string[];
  });
}

/**
 * Undoes the last batch of migrations (what one `migrate` applied), newest first, as the only
 * migrator (asOnlyMigrator); returns the names rolled back (none when nothing was applied). Their
 * `down` drops what they created, data included.
 */
export async function rollbackLastBatch(db: Knex, opts: MigrateOptions = {}): Promise<string[]> {
  return asOnlyMigrator(db, opts.log ?? (() => undefined), async () => {
    const [, rolledBack] = await db.migrate.rollback();
    return rolledBack as string[];
  });
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

/** A pooled pg connection, as knex's pool hands it out. */
interface PooledConnection {
  query(text: string): Promise<unknown>;
  /** Set by knex's pg dialect (and here) when the connection must not be reused; the pool drops it. */
  __knex__disposed?: unknown;
}

/** Knex's root instance with the parts a transactor is built from (not in knex's typings). */
type KnexRoot = Knex & { context: Record<string, unknown> };

/** A query or savepoint asked for after its transaction (or savepoint) ended, refused as knex refuses it. */
const refuseEnded = () => Promise.reject(new Error('Transaction query already complete: the transaction has ended'));

const refuseManual = () =>
  Promise.reject(new Error('transaction() commits and rolls back; work resolves or throws instead'));

/** What the transactors of one transaction share: its connection and how many savepoints it opened. */
interface TxState {
  conn: PooledConnection;
  /** Savepoints opened so far (numbers their names). */
  savepoints: number;
}

/**
 * A transactor for `work`: a knex instance whose queries all run on the transaction's connection,
 * and fail once the transaction (or its savepoint) is over. It inherits everything else from the
 * root knex instance and its client (prototypes), so making one costs a few small objects. knex's
 * own `db.transaction()` builds a whole knex instance per transaction instead: a closure per query
 * method, every property definition, an event emitter. That was about 300 µs of CPU and most of
 * the garbage of a transaction with one statement. `trx.transaction(work)` (or `savepoint`) runs
 * `work` in a savepoint with a transactor of its own, as knex does.
 */
function transactor(db: Knex, tx: TxState, ended: () => boolean, parent?: Knex.Transaction): Knex.Transaction {
  const root = db as KnexRoot;
  const client = Object.create(db.client) as Record<string, unknown>;
  client.transacting = true;
  client.acquireConnection = () => (ended() ? refuseEnded() : Promise.resolve(tx.conn));
  client.releaseConnection = () => Promise.resolve();
  const context = Object.create(root.context) as Record<string, unknown>;
  context.client = client;
  const trx = function (tableName?: string, options?: unknown) {
    const qb = (context.queryBuilder as () => Knex.QueryBuilder)();
    return tableName ? (qb as unknown as { table(t: string, o?: unknown): unknown }).table(tableName, options) : qb;
  } as unknown as Knex.Transaction & Record<string, unknown>;
  const nested = <T>(work: (inner: Knex.Transaction) => Promise<T>) => {
    if (ended()) return refuseEnded();
    return savepoint(db, tx, ended, trx, work);
  };
  context.transaction = nested;
  // The query methods and property accessors of the root instance read `this.context`.
  Object.setPrototypeOf(trx, db);
  Object.assign(trx, {
    context,
    isTransaction: true,
    parentTransaction: parent,
    commit: refuseManual,
    rollback: refuseManual,
    savepoint: nested,
    isCompleted: ended,
  });
  return trx;
}

/** Runs `work` in a savepoint of `parent`'s transaction: released when it resolves, rolled back to when it throws. */
async function savepoint<T>(
  db: Knex,
  tx: TxState,
  parentEnded: () => boolean,
  parent: Knex.Transaction,
  work: (inner: Knex.Transaction) => Promise<T>,
): Promise<T> {
  const name = `tx_savepoint_${++tx.savepoints}`;
  let done = false;
  await tx.conn.query(`SAVEPOINT ${name}`);
  try {
    const result = await work(transactor(db, tx, () => done || parentEnded(), parent));
    done = true;
    await tx.conn.query(`RELEASE SAVEPOINT ${name}`);
    return result;
  } catch (err) {
    if (!done) {
      done = true;
      await tx.conn.query(`ROLLBACK TO SAVEPOINT ${name}`).catch(() => undefined);
    }
    throw err;
  } finally {
    done = true;
  }
}

/**
 * Runs `work` in a transaction, then the side effects it registered with `afterCommit` (pushes,
 * credential invalidations, enqueues), in order, once the commit succeeded, and awaits them before
 * returning, so a narrowing change has reached every instance when the caller answers. A rollback
 * drops them. A failing hook is reported and does not fail the others or the committed change:
 * effects that must not be lost go through the outbox instead (shared/outbox.ts).
 *
 * The transaction is BEGIN and COMMIT (or ROLLBACK when `work` throws, rethrowing its error) on
 * one pooled connection, with a light transactor (`transactor`); nested ones are savepoints.
 */
export async function transaction<T>(db: Knex, work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  const hooks: AfterCommit[] = [];
  const conn = (await db.client.acquireConnection()) as PooledConnection;
  const state = { done: false };
  const ended = () => state.done;
  let result: T;
  try {
    await conn.query('BEGIN');
    try {
      const trx = transactor(db, { conn, savepoints: 0 }, ended);
      afterCommitHooks.set(trx, hooks);
      result = await work(trx);
    } catch (err) {
      state.done = true; // before the ROLLBACK: a late query must not run after it, outside the transaction
      // A connection that cannot roll back is not handed out again.
      await conn.query('ROLLBACK').catch((rollbackErr: unknown) => {
        conn.__knex__disposed = rollbackErr;
      });
      // A statement cut off before the COMMIT was sent: whatever became of it, the transaction
      // did not commit, so nothing of it is applied and the client may try again.
      throw toHttpError(err)?.message === QUERY_OUTCOME_UNKNOWN
        ? Object.assign(serviceUnavailable('the database is unreachable; try again shortly'), { cause: err })
        : err;
    }
    state.done = true;
    await conn.query('COMMIT').catch((err: unknown) => {
      // The connection went with the COMMIT out: the server may have committed. Not "try again".
      throw toHttpError(err)?.status === 503
        ? Object.assign(serviceUnavailable(QUERY_OUTCOME_UNKNOWN), { cause: err })
        : err;
    });
  } finally {
    // BEGIN may have failed before either of the above.
    state.done = true;
    await db.client.releaseConnection(conn);
  }
  for (const hook of hooks) await runCommitted(hook);
  return result;
}

/**
 * Runs a side effect of a change that has committed (an afterCommit hook, or the follow-up of a
 * one-statement write without a transaction): awaited, and its failure reported rather than thrown,
 * since the change stands.
 */
export async function runCommitted(hook: AfterCommit): Promise<void> {
  try {
    await hook();
  } catch (err) {
    reportHookFailure(err);
  }
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
