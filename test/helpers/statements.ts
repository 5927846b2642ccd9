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
