import DataLoader from 'dataloader';
import type { Knex } from 'knex';
import type { Model, ModelObject } from 'objection';
import { badRequest, notFound } from './errors';
import { ParentCounter, parentCounterOf, parentCountSql } from './queries/counters';
import { isUuid } from './zod';

/** Postgres compares uuids case-insensitively; text ids stay exact. */
const keyOf = (id: string) => (isUuid(id) ? id.toLowerCase() : id);

/**
 * Rows grouped by key, in their order (a batch's answer per key): `value` turns each row into what
 * the group holds (the row itself by default); the key is read before it.
 */
export function groupBy<T, V = T>(
  rows: readonly T[],
  key: (r: T) => string,
  value: (r: T) => V = (r) => r as unknown as V,
): Map<string, V[]> {
  const out = new Map<string, V[]>();
  for (const r of rows) {
    const k = key(r);
    const list = out.get(k);
    if (list) list.push(value(r));
    else out.set(k, [value(r)]);
  }
  return out;
}

/** Upper bound of ids in one statement (the array is one bind parameter). */
const MAX_BATCH = 1000;

/**
 * The DataLoader of every batched read: the keys asked for while one turn of the event loop handles
 * incoming requests go to one `fetch(keys)`, which answers in the order of the keys it was given;
 * nothing is cached between batches, so each caller sees what was committed before it asked. A key
 * asked for by several callers in the turn is fetched once. DataLoader without its cache merges
 * nothing: 50 concurrent requests of one user sent that user's id 50 times, which a `= ANY($1)`
 * read shrugs off but a read over `unnest($1)` ran its subqueries for 50 times over (with 500
 * roles, GET /v1/users/me/2fa/requirement spent 700 µs of PostgreSQL's CPU a statement scanning
 * them), and an array of over 64 elements is planned for its values on every execution
 * (shared/preparedStatements.ts).
 */
export function turnLoader<V>(
  fetch: (keys: string[]) => Promise<ReadonlyArray<V | Error>>,
  maxBatchSize = MAX_BATCH,
): DataLoader<string, V> {
  return new DataLoader<string, V>(
    async (asked) => {
      const slot = new Map<string, number>();
      const keys: string[] = [];
      const slots = asked.map((k) => {
        let i = slot.get(k);
        if (i === undefined) slot.set(k, (i = keys.push(k) - 1));
        return i;
      });
      const answers = await fetch(keys);
      return keys.length === asked.length ? answers : slots.map((i) => answers[i]);
    },
    // Wait for the I/O phase to finish: requests that arrived together are batched together.
    { cache: false, maxBatchSize, batchScheduleFn: (run) => setImmediate(run) },
  );
}

/**
 * Reads rows by primary key (or by another unique column), batched: every `load(id)` made while one turn of the event loop
 * handles incoming requests is answered by a single `SELECT … WHERE id = ANY($1)`, sent as a
 * named prepared statement (parsed and planned once per connection). Nothing is cached between
 * batches, so each read sees the database as of a statement issued after the call: under
 * concurrency N requests cost one round trip instead of N, and a lone request one turn later.
 *
 * Only for reads outside a transaction; a transaction's reads and `FOR UPDATE` stay on the model's
 * query builder. If the batched statement fails (a malformed id, say), each id is retried on its
 * own so one bad id cannot fail the others.
 */
export class RowLoader<M extends Model> {
  private readonly loader: DataLoader<string, M | undefined>;

  private readonly column: string;

  constructor(
    private readonly model: typeof Model & (new () => M),
    column?: string,
    /** The database to read; by default the one the models are bound to. */
    private readonly db?: Knex,
  ) {
    this.column = column ?? (model.idColumn as string);
    this.loader = turnLoader((ids) => this.fetch(ids));
  }

  /** The row with this id, or undefined. */
  load(id: string): Promise<M | undefined> {
    return this.loader.load(keyOf(id));
  }

  /** The batch's SQL text, compiled once (knex's query compiler cost more than the batch's round trip). */
  private sql?: string;

  private async select(ids: readonly string[]): Promise<M[]> {
    const db = this.db ?? this.model.knex();
    if (this.sql === undefined) {
      const table = this.model.tableName;
      this.sql = db
        .select('*')
        .from(table)
        .whereRaw('?? = ANY(?)', [`${table}.${this.column}`, []])
        .toSQL().sql;
    }
    // A named prepared statement (shared/preparedStatements.ts), which also moves on to a new name
    // when a migration changed the table's columns since it was prepared.
    const { rows } = await db.raw<{ rows: Array<Record<string, unknown>> }>(this.sql, [ids as string[]]);
    return rows.map((r) => this.model.fromDatabaseJson(r) as M);
  }

  private async fetch(ids: readonly string[]): Promise<Array<M | undefined | Error>> {
    let rows: M[];
    try {
      rows = await this.select(ids);
    } catch (err) {
      if (ids.length === 1) return [err as Error];
      return Promise.all(
        ids.map((id) =>
          this.select([id]).then(
            (r) => r[0],
            (e: Error) => e,
          ),
        ),
      );
    }
    const byId = new Map<string, M>();
    for (const r of rows) byId.set(keyOf(String((r as unknown as Record<string, unknown>)[this.column])), r);
    return ids.map((id) => byId.get(keyOf(id)));
  }
}

const loaders = new WeakMap<object, RowLoader<Model>>();
const keyLoaders = new WeakMap<object, Map<string, RowLoader<Model>>>();
const dbLoaders = new WeakMap<Knex, Map<string, RowLoader<Model>>>();

function loaderOf<M extends Model>(model: typeof Model & (new () => M), column?: string, db?: Knex): RowLoader<M> {
  let byKey: Map<string, RowLoader<Model>> | undefined;
  if (db) {
    byKey = dbLoaders.get(db);
    if (!byKey) dbLoaders.set(db, (byKey = new Map()));
  } else if (column) {
    byKey = keyLoaders.get(model);
    if (!byKey) keyLoaders.set(model, (byKey = new Map()));
  } else {
    let loader = loaders.get(model);
    if (!loader) loaders.set(model, (loader = new RowLoader(model) as unknown as RowLoader<Model>));
    return loader as unknown as RowLoader<M>;
  }
  const key = `${model.tableName}:${column ?? ''}`;
  let loader = byKey.get(key);
  if (!loader) byKey.set(key, (loader = new RowLoader(model, column, db) as unknown as RowLoader<Model>));
  return loader as unknown as RowLoader<M>;
}

/**
 * The process-wide RowLoader of a model: `rowById(Trip).load(id)` for a plain read by primary key.
 * Pass `db` to read that database rather than the one the models are bound to.
 */
export function rowById<M extends Model>(model: typeof Model & (new () => M), db?: Knex): RowLoader<M> {
  return loaderOf(model, undefined, db);
}

/**
 * The process-wide RowLoader of a model by a UNIQUE column: `rowBy(Session, 'token_hash', db).load(h)`.
 * The same batching and prepared statement as rowById; the column must hold at most one row per
 * value (a unique index), or the loader answers one of them.
 */
export function rowBy<M extends Model>(model: typeof Model & (new () => M), column: string, db?: Knex): RowLoader<M> {
  return loaderOf(model, column, db);
}

/** `trip_categories` → `trip category`: the default name of a model's rows in a 404 message. */
function rowLabel(model: typeof Model): string {
  return model.tableName.replace(/ies$/, 'y').replace(/s$/, '').replace(/_/g, ' ');
}

/**
 * The one way to read a row by id: batched and prepared through `rowById`, 404 (`<what> not found`)
 * when there is no such row. Reads inside a transaction, with `FOR UPDATE` or with extra conditions
 * (soft deletion, ownership in the WHERE) stay on the model's query builder.
 */
export async function findOr404<M extends Model>(
  model: typeof Model & (new () => M),
  id: string,
  what = rowLabel(model),
): Promise<M> {
  const row = await rowById(model).load(id);
  if (!row) throw notFound(what);
  return row;
}

/**
 * A row a request body refers to by id (`role_id`, `permission_id`), read as findOr404 reads it:
 * a missing one is a 400 naming the field (`role_id: no such role`), as is any reference to a
 * missing record in a body (a foreign key's failure, assertReferencesExist); an unknown id in the
 * path names the resource asked for and stays findOr404's 404.
 */
export async function findReferenced<M extends Model>(
  model: typeof Model & (new () => M),
  id: string,
  field: string,
  what = rowLabel(model),
): Promise<M> {
  const row = await rowById(model).load(id);
  if (!row) throw badRequest(`${field}: no such ${what}`);
  return row;
}

/**
 * A keyed read batched per event-loop turn, for reads the row loader cannot express (joins,
 * subqueries, a user's latest row): the keys asked for while one turn handles incoming requests go
 * to one `fetch(keys)`, which answers the rows it found by key (uuids lower-cased). Nothing is kept
 * between batches. If a batch fails (a malformed key, say), each key is read on its own, so one bad
 * key fails only its caller.
 */
export function turnBatcher<V>(
  fetch: (keys: string[]) => Promise<Map<string, V>>,
): (key: string) => Promise<V | undefined> {
  const loader = turnLoader<V | undefined>(async (keys) => {
    try {
      const found = await fetch(keys);
      return keys.map((k) => found.get(k));
    } catch (err) {
      if (keys.length === 1) return [err as Error];
      return Promise.all(
        keys.map((k) =>
          fetch([k]).then(
            (found) => found.get(k),
            (e: Error) => e,
          ),
        ),
      );
    }
  });
  return (key) => loader.load(keyOf(key));
}

/**
 * `turnBatcher` for a read that takes its database: one batcher per database (a pool or a
 * transaction), made on first use, so callers pass `db` as they would to a plain query.
 */
export function turnBatcherByDb<V>(
  fetch: (db: Knex, keys: string[]) => Promise<Map<string, V>>,
): (db: Knex, key: string) => Promise<V | undefined> {
  const byDb = new WeakMap<Knex, (key: string) => Promise<V | undefined>>();
  return (db, key) => {
    let read = byDb.get(db);
    if (!read) byDb.set(db, (read = turnBatcher((keys) => fetch(db, keys))));
    return read(key);
  };
}

/**
 * The SQL text of a batch read, compiled once per database: knex's query compiler costs more than
 * most batches' round trip. `build` makes the query with a placeholder value for each binding (an
 * empty array for the keys); callers send the text with `db.raw(sql(db), bindings)`, bindings in
 * the order the query takes them. The text is then sent as a named prepared statement
 * (shared/preparedStatements.ts) like any other.
 */
export function compiledOnce(build: (db: Knex) => { toSQL(): { sql: string } }): (db: Knex) => string {
  const byDb = new WeakMap<Knex, string>();
  return (db) => {
    let sql = byDb.get(db);
    if (sql === undefined) byDb.set(db, (sql = build(db).toSQL().sql));
    return sql;
  };
}

/** `rowsBy` readers per database, by statement name (table, column and order make the SQL). */
const rowsByLoaders = new WeakMap<Knex, Map<string, (key: string) => Promise<Model[] | undefined>>>();

/**
 * All rows whose `column` equals a key, in `orderBy` order: a user's integrations, consents or
 * OAuth clients. The keys asked for during one turn share one prepared `SELECT … WHERE column =
 * ANY($1) ORDER BY …` (as `rowBy` does for one row per key), so N concurrent requests for N owners'
 * lists cost one statement. For small per-key lists with no paging; filter further in the caller.
 */
export function rowsBy<M extends Model>(
  model: typeof Model & (new () => M),
  column: string,
  orderBy: ReadonlyArray<readonly [string, 'asc' | 'desc']>,
  db: Knex = model.knex(),
): { load(key: string): Promise<M[]> } {
  const table = model.tableName;
  const name = `rows_by_${column}:${table}:${orderBy.map(([c, d]) => `${c}_${d}`).join(',')}`;
  let byName = rowsByLoaders.get(db);
  if (!byName) rowsByLoaders.set(db, (byName = new Map()));
  let read = byName.get(name);
  if (!read) {
    // Compiled once; sent as a named prepared statement (shared/preparedStatements.ts).
    const sql = db
      .select('*')
      .from(table)
      .whereRaw('?? = ANY(?)', [`${table}.${column}`, []])
      .orderBy([...orderBy.map(([c, order]) => ({ column: c, order })), { column: model.idColumn as string }])
      .toSQL().sql;
    read = turnBatcher(async (keys) => {
      const { rows } = await db.raw<{ rows: Array<Record<string, unknown>> }>(sql, [keys]);
      return groupBy(
        rows,
        (r) => keyOf(String(r[column])),
        (r): Model => model.fromDatabaseJson(r),
      );
    });
    byName.set(name, read);
  }
  const load = read;
  return { load: async (key) => ((await load(key)) ?? []) as M[] };
}

/**
 * One read shared by every caller in a turn (a settings row, a short reference list): concurrent
 * requests cost one statement. Nothing is kept between turns, so each caller still sees every
 * write committed before it asked.
 */
export function sharedPerTurn<V>(fetch: (db: Knex) => Promise<V>): (db: Knex) => Promise<V> {
  const read = turnBatcherByDb(async (db) => new Map([['*', await fetch(db)]]));
  return async (db) => (await read(db, '*')) as V;
}

/**
 * A row without some columns (what a statement added beside the table's own), as a plain copy: a
 * rest pattern (`{ a, ...rest }`) takes V8's slow generic path and cost a tenth of a page's CPU.
 */
export function withoutColumns(
  row: Readonly<Record<string, unknown>>,
  drop: ReadonlySet<string>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k in row) if (!drop.has(k)) out[k] = row[k];
  return out;
}

/** The columns pagesOf adds to each row. */
const PAGE_COLUMNS: ReadonlySet<string> = new Set(['__parent', '__total']);

/**
 * Identical computations asked for in one turn, run once: `computeOncePerTurn()` makes a function
 * `(db, key, compute)` whose callers with the same database and key during one turn of the event
 * loop share the first caller's `compute()` (and its result or error). Nothing is kept once the
 * turn's batches are sent, so each caller's answer comes from statements sent after it asked. For a
 * read whose building costs more than its statement (an audit page: a query built and compiled,
 * rows made into models) when many callers ask for the same one at once. The key must name
 * everything the result depends on; the result is shared, so callers must not change it.
 */
export function computeOncePerTurn<V>(): (db: Knex, key: string, compute: () => Promise<V>) => Promise<V> {
  let turn: Map<Knex, Map<string, Promise<V>>> | undefined;
  return (db, key, compute) => {
    if (!turn) {
      turn = new Map();
      setImmediate(() => {
        turn = undefined;
      });
    }
    let byKey = turn.get(db);
    if (!byKey) turn.set(db, (byKey = new Map()));
    let result = byKey.get(key);
    if (!result) byKey.set(key, (result = compute()));
    return result;
  };
}

/**
 * Identical expensive computations (a whole table as one answer), at most one running per key:
 * `coalesced()` makes a function `(db, key, compute)` whose callers share a computation that starts
 * after they asked. Callers of one turn share one that starts at the end of the turn; callers who
 * ask while it runs share the next one, which starts when the running one ends. So N concurrent
 * requests for a read that takes longer than a turn cost about two computations, not N piled up on
 * the pool (each of which would take longer the more there are), and every caller's answer still
 * comes from statements sent after it asked. The result is shared: callers must not change it.
 */
export function coalesced<V>(): (db: Knex, key: string, compute: () => Promise<V>) => Promise<V> {
  interface Flight {
    running: boolean;
    next?: { promise: Promise<V>; start(): void };
  }
  const flights = new WeakMap<Knex, Map<string, Flight>>();
  const run = (compute: () => Promise<V>): Promise<V> => {
    try {
      return compute();
    } catch (err) {
      return Promise.reject(err);
    }
  };
  return (db, key, compute) => {
    let byKey = flights.get(db);
    if (!byKey) flights.set(db, (byKey = new Map()));
    let flight = byKey.get(key);
    if (!flight) byKey.set(key, (flight = { running: false }));
    if (flight.next) return flight.next.promise;
    const f = flight;
    const map = byKey;
    let start!: () => void;
    const promise = new Promise<V>((resolve, reject) => {
      start = () => {
        f.next = undefined;
        f.running = true;
        run(compute)
          .then(resolve, reject)
          .finally(() => {
            f.running = false;
            if (f.next) f.next.start();
            else if (map.get(key) === f) map.delete(key);
          });
      };
    });
    f.next = { promise, start };
    // Not while one runs: the running one starts this one when it ends.
    if (!f.running) setImmediate(() => f.next?.promise === promise && !f.running && start());
    return promise;
  };
}

/**
 * Identical reads asked for in one turn, run once: the statement (SQL and bindings) is sent at the
 * end of the turn, as every batch here is, and each caller gets the rows. For reads whose answer
 * many callers share at once (the first page of a busy list, say). The rows are shared: callers
 * must copy what they change (model instances are made per caller from them).
 */
interface IdenticalRead {
  sql: string;
  bindings: readonly unknown[];
  waiters: Array<{ resolve(rows: Array<Record<string, unknown>>): void; reject(err: unknown): void }>;
}

/** The reads asked for during this turn, per database and statement (SQL and bindings as JSON). */
let thisTurn: Map<Knex, Map<string, IdenticalRead>> | undefined;

function sendIdenticalReads(): void {
  const turn = thisTurn!;
  thisTurn = undefined;
  for (const [db, reads] of turn)
    for (const read of reads.values())
      db.raw<{ rows: Array<Record<string, unknown>> }>(read.sql, read.bindings as Knex.RawBinding[]).then(
        ({ rows }) => read.waiters.forEach((w) => w.resolve(rows)),
        (err: unknown) => read.waiters.forEach((w) => w.reject(err)),
      );
}

export function readOncePerTurn(
  db: Knex,
  sql: string,
  bindings: readonly unknown[],
): Promise<Array<Record<string, unknown>>> {
  return new Promise((resolve, reject) => {
    if (!thisTurn) {
      thisTurn = new Map();
      setImmediate(sendIdenticalReads);
    }
    let reads = thisTurn.get(db);
    if (!reads) thisTurn.set(db, (reads = new Map()));
    let key: string;
    try {
      key = JSON.stringify([sql, bindings]);
    } catch {
      // A binding JSON cannot spell (a BigInt): this read is not shared.
      key = `${sql}\0${reads.size}\0${Math.random()}`;
    }
    let read = reads.get(key);
    if (!read) reads.set(key, (read = { sql, bindings, waiters: [] }));
    read.waiters.push({ resolve, reject });
  });
}

/**
 * A knex query's rows through readOncePerTurn, outside a transaction (in one, the query runs as
 * is). The rows may be shared with other callers: copy before changing them.
 */
export async function queryOncePerTurn(
  db: Knex,
  query: Knex.QueryBuilder,
): Promise<ReadonlyArray<Readonly<Record<string, unknown>>>> {
  if ((db as Knex.Transaction).isTransaction) return (await query) as Array<Record<string, unknown>>;
  const { sql, bindings } = query.toSQL();
  return readOncePerTurn(db, sql, bindings);
}

/** From this offset on, pagesOf reads a page as a deferred join (its keys first, then its rows). */
const DEFERRED_FROM = 1000;

/**
 * Pages of a parent's rows (a trip's points, a geofence's events): `load(parentId, limit,
 * offset)` answers the page and the parent's exact row count. The parents asked for in one turn
 * with the same limit and offset share one statement: a LATERAL page per parent and a count per
 * parent, over the (parent, order) index. Each parent's page follows from its total: a page past
 * the end reads no row, and a page past the middle is read in the reversed order from the end (when
 * `orderBy` ends in the primary key, so that it reverses exactly) and sorted back, the same rows as
 * reading forward. Make one per list at module level (its batches live in it). A page may be shared
 * by the turn's callers of the same parent: do not change it.
 */
export function pagesOf<M extends Model, Plain extends boolean = false>(
  model: typeof Model & (new () => M),
  parentColumn: string,
  /** The parent column's PostgreSQL type (`uuid`, `text`): the keys are sent as one array of it. */
  parentType: 'uuid' | 'text',
  orderBy: ReadonlyArray<readonly [string, 'asc' | 'desc']>,
  opts: {
    /** Count at most this many rows per parent (the total then says "at least"), for parents with millions. */
    countCap?: number;
    /** Read each parent's exact total from this keyed row counter or stored count instead of counting its rows. */
    counter?: ParentCounter;
    /**
     * Results as the rows pg returned (the table's columns, plus this statement's `__parent` and
     * `__total`), not model instances: for a presenter that reads plain rows, which then skips a
     * copy and a model per row.
     */
    plain?: Plain;
  } = {},
): {
  load(
    db: Knex,
    parentId: string,
    limit: number,
    offset: number,
  ): Promise<{ results: Array<Plain extends true ? ModelObject<M> : M>; total: number }>;
} {
  type Result = Plain extends true ? ModelObject<M> : M;
  const table = model.tableName;
  const id = model.idColumn as string;
  if (opts.counter) {
    const c = parentCounterOf(opts.counter);
    if (c.table !== table || c.column !== parentColumn)
      throw new Error(`pagesOf(${table}): counter ${opts.counter} does not count ${table} by ${parentColumn}`);
  }
  const count = opts.counter
    ? parentCountSql(opts.counter, 'k.id')
    : opts.countCap === undefined
      ? `SELECT count(*) FROM "${table}" c WHERE c."${parentColumn}" = k.id`
      : `SELECT count(*) FROM (SELECT 1 FROM "${table}" c WHERE c."${parentColumn}" = k.id LIMIT ${Math.floor(opts.countCap)}) capped`;
  const order = orderBy.map(([c, d]) => `x."${c}" ${d === 'desc' ? 'DESC' : 'ASC'}`).join(', ');
  const inner = orderBy.map(([c, d]) => `"${c}" ${d === 'desc' ? 'DESC' : 'ASC'}`).join(', ');
  // A page past the middle is read in the reversed order from the end, then sorted back: only
  // when the order ends in the primary key, so that it reverses exactly (PostgreSQL's default NULLS
  // placement reverses with the direction).
  const reversed =
    orderBy.at(-1)?.[0] === id ? orderBy.map(([c, d]) => `"${c}" ${d === 'desc' ? 'ASC' : 'DESC'}`).join(', ') : '';
  // The total is the parent's row count unless a capped count reached its cap.
  const exact = opts.countCap === undefined ? 'true' : `t.__total < ${Math.floor(opts.countCap)}`;
  /**
   * The rows of one parent's page: the SELECT of the rows `read` (forward or reverse) in `orderSql`
   * from `limitSql` and `offsetSql`. A deep page (`deep`) is a deferred join: the keys of the page
   * come off the (parent, order, id) index alone, skipping `offset` index entries, then only the
   * page's rows are read by primary key. Read whole, OFFSET fetched every skipped row from the heap
   * (page 500 of a trip's 200,000 points: about 200 ms).
   */
  const pageRows = (deep: boolean, read: string, orderSql: string, limitSql: string, offsetSql: string) => {
    const where = `"${parentColumn}" = k.id AND m.__read = '${read}'`;
    return deep
      ? // OFFSET 0: the row lookup stays one probe of the primary key per key (a join the planner
        // could make a scan of the whole table when it is small).
        `(SELECT y.* FROM (SELECT "${id}" AS __key FROM "${table}" WHERE ${where}
                 ORDER BY ${orderSql} LIMIT ${limitSql} OFFSET ${offsetSql}) d
               CROSS JOIN LATERAL (SELECT * FROM "${table}" WHERE "${id}" = d.__key OFFSET 0) y)`
      : `(SELECT * FROM "${table}" WHERE ${where}
                 ORDER BY ${orderSql} LIMIT ${limitSql} OFFSET ${offsetSql})`;
  };
  const read = turnBatcherByDb(async (db, keys) => {
    // Keys are `limit offset parent`: one statement per (limit, offset) asked for in the turn.
    // The parent is the rest of the key: a text identifier may hold spaces.
    const cut = (k: string) => k.indexOf(' ', k.indexOf(' ') + 1);
    const groups = groupBy(
      keys,
      (k) => k.slice(0, cut(k)),
      (k) => k.slice(cut(k) + 1),
    );
    const found = new Map<string, { results: Result[]; total: number }>();
    await Promise.all(
      [...groups].map(async ([g, parents]) => {
        const [limit, offset] = g.split(' ').map(Number) as [number, number];
        // Deep enough that the rows it skips cost more than reading the page by key (either way).
        const deep = offset >= DEFERRED_FROM;
        const { rows } = await db.raw<{ rows: Array<Record<string, unknown>> }>(
          // The total is a lateral of the parent, so it is counted once per parent: as a subquery in
          // the select list PostgreSQL ran it once per returned row (a page of 10 counted 10 times).
          // OFFSET 0 keeps the planner from pulling the lateral up into the select list again.
          // How each parent's page is read follows from its exact total (`m`): not at all past the
          // end, from the end past the middle (OFFSET walks every row it skips: the last page of a
          // trip of 1,000,000 points walked them all), else forward. Each branch's condition names
          // no row of the table, so PostgreSQL tests it once per parent before scanning anything
          // (the LIMIT above it is computed first: never negative, even for a branch not taken).
          `SELECT k.id::text AS __parent, t.__total, x.*
             FROM unnest(?::${parentType}[]) WITH ORDINALITY AS k(id, n)
             CROSS JOIN LATERAL (SELECT (${count}) AS __total OFFSET 0) t
             CROSS JOIN LATERAL (
               SELECT CASE WHEN NOT (${exact}) THEN 'forward'
                           WHEN ?::bigint >= t.__total THEN 'past'
                           WHEN ${reversed ? 'true' : 'false'} AND ?::bigint > 0
                                AND t.__total - ?::bigint - ?::bigint < ?::bigint THEN 'reverse'
                           ELSE 'forward' END AS __read
               OFFSET 0) m
             LEFT JOIN LATERAL (
               ${pageRows(deep, 'forward', inner, '?', '?')}${
                 reversed
                   ? `
               UNION ALL
               ${pageRows(
                 deep,
                 'reverse',
                 reversed,
                 'greatest(0, least(?::bigint, t.__total - ?::bigint))',
                 'greatest(0, t.__total - ?::bigint - ?::bigint)',
               )}`
                   : ''
               }) x ON true
            ORDER BY k.n, ${order}`,
          [
            [...new Set(parents)],
            ...[offset, offset, offset, limit, offset],
            ...[limit, offset],
            ...(reversed ? [limit, offset, offset, limit] : []),
          ],
        );
        for (const row of rows) {
          const key = `${limit} ${offset} ${keyOf(String(row.__parent))}`;
          let page = found.get(key);
          if (!page) found.set(key, (page = { results: [], total: Number(row.__total) }));
          if (row[id] === null) continue;
          page.results.push((opts.plain ? row : model.fromDatabaseJson(withoutColumns(row, PAGE_COLUMNS))) as Result);
        }
      }),
    );
    return found;
  });
  return {
    load: async (db, parentId, limit, offset) => {
      const page = await read(db, `${limit} ${offset} ${keyOf(parentId)}`);
      return page ?? { results: [], total: 0 };
    },
  };
}
