import type { Knex } from 'knex';

/**
 * The statements naming `table` (as a whole word) that `db` sends while `fn` runs, from knex's
 * 'query' events: the model layer, the row loaders and raw queries all pass through them.
 */
export async function statementsOn<T>(
  db: Knex,
  table: string,
  fn: () => PromiseLike<T>,
): Promise<{ result: T; sql: string[]; count: number }> {
  const sql: string[] = [];
  const re = new RegExp(`\\b${table}\\b`);
  const listener = (q: { sql: string }) => {
    if (re.test(q.sql)) sql.push(q.sql);
  };
  db.on('query', listener);
  try {
    const result = await fn();
    return { result, sql, count: sql.length };
  } finally {
    db.off('query', listener);
  }
}

/** Every statement (with its bindings) `db` sends while `fn` runs, and `fn`'s result. */
export async function statementsWhile<T>(
  db: Knex,
  fn: () => PromiseLike<T>,
): Promise<{ result: T; statements: Array<{ sql: string; bindings: unknown[] }> }> {
  const statements: Array<{ sql: string; bindings: unknown[] }> = [];
  const listener = (q: { sql: string; bindings?: unknown[] }) =>
    statements.push({ sql: q.sql, bindings: q.bindings ?? [] });
  db.on('query', listener);
  try {
    return { result: await fn(), statements };
  } finally {
    db.off('query', listener);
  }
}

/**
 * The JSON plan of a statement as a route sent it ($n parameters), from EXPLAIN on a connection of
 * its own: `settings` (e.g. `SET enable_seqscan = off`) apply to that connection only and are
 * reset before it goes back to the pool; `analyze` runs it and adds actual rows.
 */
export async function explainJson(
  db: Knex,
  statement: { sql: string; bindings: unknown[] },
  opts: { analyze?: boolean; settings?: string[] } = {},
): Promise<string> {
  type Conn = { query(text: string, values?: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }> };
  const conn = (await db.client.acquireConnection()) as Conn;
  try {
    for (const setting of opts.settings ?? []) await conn.query(setting);
    const { rows } = await conn.query(
      `EXPLAIN (${opts.analyze ? 'ANALYZE, ' : ''}FORMAT JSON) ${statement.sql}`,
      statement.bindings,
    );
    return JSON.stringify(rows[0]['QUERY PLAN']);
  } finally {
    if (opts.settings?.length) await conn.query('RESET ALL');
    await db.client.releaseConnection(conn);
  }
}

/**
 * The plan a pooled connection runs for a statement a route sent ($n parameters): prepared under a
 * name, as shared/preparedStatements.ts sends it, and run under `EXPLAIN (ANALYZE, FORMAT JSON)
 * EXECUTE` with its bindings as literals, with `plan_cache_mode` set to `generic` (the plan PostgreSQL
 * settles on after five runs, which knows no parameter value) or `custom` (planned for the values).
 * EXPLAIN of the text with bindings plans for the values only.
 */
export async function explainPrepared(
  db: Knex,
  statement: { sql: string; bindings: readonly unknown[] },
  mode: 'generic' | 'custom',
): Promise<string> {
  type Conn = {
    query(text: string, values?: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }>;
    escapeLiteral(s: string): string;
  };
  const text = (v: unknown): string | null =>
    v === null || v === undefined
      ? null
      : Array.isArray(v)
        ? `{${v.map((x) => (x === null ? 'NULL' : `"${String(text(x)).replace(/[\\"]/g, '\\$&')}"`)).join(',')}}`
        : v instanceof Date
          ? v.toISOString()
          : String(v);
  const conn = (await db.client.acquireConnection()) as Conn;
  let prepared = false;
  try {
    await conn.query(`SET plan_cache_mode = force_${mode}_plan`);
    await conn.query(`PREPARE explained AS ${statement.sql}`);
    prepared = true;
    const literal = (v: unknown) => {
      const t = text(v);
      return t === null ? 'NULL' : conn.escapeLiteral(t);
    };
    const args = statement.bindings.length ? `(${statement.bindings.map(literal).join(', ')})` : '';
    const { rows } = await conn.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE explained${args}`);
    return JSON.stringify(rows[0]['QUERY PLAN']);
  } finally {
    // Only this one: the connection's named statements (shared/preparedStatements.ts) stay.
    if (prepared) await conn.query('DEALLOCATE explained');
    await conn.query('RESET ALL');
    await db.client.releaseConnection(conn);
  }
}

/**
 * The rows the scans of `table` in a JSON plan (EXPLAIN ANALYZE, FORMAT JSON) read from the table
 * itself: those its scans returned, except that an index-only scan reads a row only when it has to
 * fetch it from the heap (`Heap Fetches`).
 */
export function heapRowsRead(planJson: string, table: string): number {
  type Node = Record<string, unknown> & { Plans?: Node[] };
  const walk = (n: Node): Node[] => [n, ...(n.Plans ?? []).flatMap(walk)];
  const plan = JSON.parse(planJson) as Array<{ Plan: Node }>;
  return walk(plan[0]!.Plan)
    .filter((n) => n['Relation Name'] === table)
    .reduce(
      (sum, n) =>
        sum +
        (n['Node Type'] === 'Index Only Scan'
          ? Number(n['Heap Fetches'])
          : Number(n['Actual Rows']) * Number(n['Actual Loops'])),
      0,
    );
}

/**
 * VACUUM (ANALYZE) `table` until the visibility map marks every page all-visible, as autovacuum
 * leaves a settled table. One VACUUM cannot mark a page whose rows a snapshot still open in the
 * database might not see (a stack's poll that started before the rows' INSERT committed, on a loaded
 * host), and then an index-only scan visits the table after all; so this vacuums again until it can.
 */
export async function vacuumSettled(db: Knex, table: string, within = 10_000): Promise<void> {
  const until = Date.now() + within;
  for (;;) {
    await db.raw(`VACUUM (ANALYZE) ??`, [table]);
    const { rows } = await db.raw<{ rows: Array<{ relpages: number; relallvisible: number }> }>(
      'SELECT relpages, relallvisible FROM pg_class WHERE oid = ?::regclass',
      [table],
    );
    if (rows[0].relallvisible >= rows[0].relpages) return;
    if (Date.now() > until) {
      const { rows: holders } = await db.raw<{ rows: unknown[] }>(
        `SELECT pid, state, backend_xmin, left(query, 200) AS query FROM pg_stat_activity
         WHERE datname = current_database() AND backend_xmin IS NOT NULL AND pid <> pg_backend_pid()`,
      );
      throw new Error(
        `${table}: ${rows[0].relallvisible} of ${rows[0].relpages} pages all-visible after ${within} ms; ` +
          `snapshots open: ${JSON.stringify(holders)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Statements an api process sends on its own schedule, never a request's: the outbox relay's
 * safety poll (every 500 ms) and the batched credential-usage stamps (every 15 s). On a starved
 * host a request can take long enough for one to land in every window.
 */
const BACKGROUND = [
  /^SELECT EXISTS \(SELECT 1 FROM side_effect_outbox /,
  /^UPDATE api_keys SET last_used_at = v\.t /,
  /^UPDATE sessions SET last_activity_at = v\.t /,
];
const isBackground = (sql: string) => BACKGROUND.some((re) => re.test(sql));

/** What `fewestStatements` needs of a stack: its pool and its api's credential cache. */
interface CountedStack {
  db: Knex;
  api: { services: { credentials: { changeMark(): number; unchangedSince(mark: number): boolean } } };
}

/**
 * The fewest statements (those `counted` keeps, all by default) `s.db` sends while `send` runs,
 * over `windows` runs in which the api's credential cache stayed trusted. A route's cost is read
 * with its credential cached; on a starved host the invalidation subscription's PING can go
 * unanswered for a second, the cache is then not trusted and every request reads its credential
 * again (by design), so such a window says nothing of the route and is run again. The api's own
 * background statements (`BACKGROUND`) are never counted, and the fewest of the windows is taken.
 */
export async function fewestStatements(
  s: CountedStack,
  send: () => PromiseLike<unknown>,
  opts: {
    windows?: number;
    counted?: (sql: string) => boolean;
    /** Filled with the counted statements of the fewest window (for a failure's message). */
    sql?: string[];
  } = {},
): Promise<number> {
  const credentials = s.api.services.credentials;
  const counts: number[] = [];
  let fewest: string[] | undefined;
  for (let attempt = 0; counts.length < (opts.windows ?? 3); attempt++) {
    if (attempt >= 30)
      throw new Error(`the credential cache was not trusted in ${attempt - counts.length} of ${attempt} windows`);
    const trustedBy = Date.now() + 5_000;
    while (credentials.changeMark() === -1 && Date.now() < trustedBy) await new Promise((r) => setTimeout(r, 20));
    const mark = credentials.changeMark();
    const statements: string[] = [];
    const count = (q: { sql: string }) => {
      if (!isBackground(q.sql) && (!opts.counted || opts.counted(q.sql))) statements.push(q.sql);
    };
    s.db.on('query', count);
    try {
      await send();
    } finally {
      s.db.off('query', count);
    }
    if (!credentials.unchangedSince(mark)) continue;
    counts.push(statements.length);
    if (!fewest || statements.length < fewest.length) fewest = statements;
  }
  opts.sql?.push(...fewest!);
  return Math.min(...counts);
}
