import { createHash } from 'node:crypto';
import type { Knex } from 'knex';

/**
 * Every single-statement SELECT / INSERT / UPDATE / DELETE / WITH that knex sends runs as a named
 * prepared statement: PostgreSQL parses it once per connection and, after a few executions, reuses
 * a generic plan. Parsing and planning were most of the database's time on the api's small reads
 * (a one-row user view: 2,900/s unnamed, 10,300/s named through the same pool), so this is the
 * first of the hot-path mechanisms (README "Hot paths") and every query gets it without asking.
 *
 * The name is a hash of the SQL text, so one text is one statement on each connection whatever
 * its bind values. Left unnamed: statements with a `;` (several commands cannot be prepared),
 * DDL and other commands, texts over 16 KB, and new texts once MAX_NAMED distinct ones have been
 * named in this process (texts that vary, such as `IN (?, ?, …)` lists of every length, cannot
 * grow each connection's statement cache without bound). A query that names its own statement
 * (`.options({ name })`) keeps that name.
 *
 * Also unnamed: a query with a large array among its values (`id = ANY(?)` with hundreds of ids, as
 * a JS array or an array literal). A generic plan is chosen for a typical value; one cached while a
 * table was small stays a sequential scan that compares each row with every element of the array
 * until the table is next analyzed, which for 66,000 ids is minutes of CPU instead of milliseconds.
 * Planned for its actual values, such a query gets an index scan or a hashed array, and planning it
 * costs nothing next to what it reads.
 *
 * Also unnamed: a text with a pattern match (`LIKE`, `ILIKE`). How many rows a pattern matches,
 * and so whether an index (a trigram index for `%term%`) pays, depends on the pattern itself; the
 * generic plan PostgreSQL switches to after five executions knows no pattern and chose a scan of
 * the whole table: a member search of a 100,000-member guild went from about 60 ms to 400-800 ms
 * on every connection that had run it five times. Such searches are rare next to reads by key,
 * and planning one costs nothing next to what it reads.
 *
 * Also unnamed: a text holding PLANNED_PER_VALUES, for a statement whose best plan depends on a
 * bound value the generic plan cannot see. The deep pages of a list read as a deferred join
 * (api/pagination.ts) are: the generic plan of `SELECT id … ORDER BY … LIMIT $1 OFFSET $2` assumes
 * a tenth of the table and sorted all 2,400,000 points of GET /v1/gps (about 2 s), where the plan
 * for the actual offset walks the timestamp index (70 ms at offset 500,000).
 *
 * A migration that changes a table's columns while the process runs makes PostgreSQL refuse a
 * `SELECT *` prepared before it (0A000, cached plan must not change result type): the generation
 * in every name then moves on and the query is sent again, so each connection prepares the new
 * shape once. Inside a transaction the refusal has already aborted it; the original error is
 * raised and the caller's retry starts a new one.
 */
const MAX_NAMED = 4000;
const MAX_TEXT = 16_384;
const PREPARABLE = /^\s*(?:select|insert|update|delete|with)\b/i;
const PATTERN_MATCH = /\bi?like\b/i;
const STALE_PLAN = '0A000';

/** A comment that makes the statement holding it run unnamed, planned for its values (see above). */
export const PLANNED_PER_VALUES = '/* planned per values */';

const names = new Map<string, string>();
let generation = 0;

/** The statement name for this SQL text, or undefined when it runs unnamed. */
export function statementName(sql: string): string | undefined {
  let base = names.get(sql);
  if (base === undefined) {
    if (
      names.size >= MAX_NAMED ||
      sql.length > MAX_TEXT ||
      sql.includes(';') ||
      !PREPARABLE.test(sql) ||
      PATTERN_MATCH.test(sql) ||
      sql.includes(PLANNED_PER_VALUES)
    )
      return undefined;
    base = `k${createHash('sha1').update(sql).digest('base64url').slice(0, 22)}`;
    names.set(sql, base);
  }
  return `${base}.${generation}`;
}

/** Elements from which an array value makes its statement be planned for its values (unnamed). */
const LARGE_ARRAY = 64;
/** The same for an array literal (`{a,b,…}`) sent as text: about 64 uuids. */
const LARGE_ARRAY_LITERAL = 64 * 37;

/** Whether a value list holds a large array (see above). */
export function hasLargeArray(values: readonly unknown[] | undefined): boolean {
  if (!values) return false;
  for (const v of values) {
    if (Array.isArray(v)) {
      if (v.length >= LARGE_ARRAY) return true;
    } else if (typeof v === 'string' && v.length >= LARGE_ARRAY_LITERAL && v.charCodeAt(0) === 123 /* { */) return true;
  }
  return false;
}

interface QueryObject {
  sql: string;
  bindings?: unknown[];
  options?: { name?: string } & Record<string, unknown>;
}
interface PgClientLike {
  _query(connection: unknown, obj: QueryObject): Promise<unknown>;
}

/**
 * knex's PostgreSQL client with statements named as above. A subclass rather than a patch of one
 * instance: knex builds each transaction's client from the dialect's prototype, and transactions
 * must prepare too.
 */
export function preparingPgClient(): typeof Knex.Client {
  // knex ships its dialects as CommonJS classes without type declarations.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const PgClient = require('knex/lib/dialects/postgres') as new (...args: unknown[]) => PgClientLike;
  const base = PgClient.prototype._query;
  class PreparingPgClient extends PgClient {
    override _query(connection: unknown, obj: QueryObject): Promise<unknown> {
      if (obj.options?.name) return base.call(this, connection, obj);
      // The text first: a multi-row INSERT of 100,000 rows is never named anyway, and its million
      // bindings are then not scanned for a large array.
      const name = statementName(obj.sql);
      if (!name || hasLargeArray(obj.bindings)) return base.call(this, connection, obj);
      obj.options = { ...obj.options, name };
      return base.call(this, connection, obj).catch((err: { code?: string }) => {
        if (err?.code !== STALE_PLAN) throw err;
        if (obj.options?.name === `${names.get(obj.sql)}.${generation}`) generation++;
        obj.options = { ...obj.options, name: statementName(obj.sql) };
        return base.call(this, connection, obj).catch(() => {
          throw err;
        });
      });
    }
  }
  return PreparingPgClient as unknown as typeof Knex.Client;
}
