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
