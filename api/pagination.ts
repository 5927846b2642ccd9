import type { Context } from 'koa';
import type { Knex } from 'knex';
import type { QueryBuilder, Model } from 'objection';
import { z, zQueryInt } from '../shared/zod';
import {
  COUNTER_SQL,
  KeyedRowCounter,
  keyedCounterName,
  ParentCounter,
  parentCounterOf,
  RowCounter,
  STORED_COUNTS,
  StoredCount,
  TotalRead,
  wholeTableCounter,
} from '../shared/queries/counters';
import { PLANNED_PER_VALUES } from '../shared/preparedStatements';
import { queryOncePerTurn } from '../shared/rowLoader';
import { canonicalPath, canonicalQuery } from './canonicalUrl';

/** `page` and `limit` query fields; limit defaults per endpoint and never exceeds 100. */
export const paginationQuery = (defaultLimit: number) =>
  z.object({
    page: zQueryInt(1, 1_000_000).default(1),
    limit: zQueryInt(1, 100).default(defaultLimit),
  });

export interface Page {
  page: number;
  limit: number;
}

export interface Paginated<T> {
  data: T[];
  pagination: { page: number; limit: number; total: number; total_pages: number };
  _links: { self: string; first: string; last: string; prev?: string; next?: string };
}

/** The _links of one page, keeping the request's other declared query fields (api/canonicalUrl.ts). */
export function pageLinks(ctx: Context, { page, limit }: Page, total: number): Paginated<unknown>['_links'] {
  const totalPages = Math.max(1, Math.ceil(total / limit));
  const path = canonicalPath(ctx);
  const query = canonicalQuery(ctx);
  const link = (p: number) => {
    const q = new URLSearchParams(query);
    q.set('page', String(p));
    q.set('limit', String(limit));
    return `${path}?${q.toString()}`;
  };
  const links: Paginated<unknown>['_links'] = { self: link(page), first: link(1), last: link(totalPages) };
  if (page > 1) links.prev = link(Math.min(page - 1, totalPages));
  if (page < totalPages) links.next = link(page + 1);
  return links;
}

/** Builds the body of a paginated list, keeping the request's other query fields in the links. */
export function paginatedBody<T>(ctx: Context, data: T[], total: number, { page, limit }: Page): Paginated<T> {
  const totalPages = Math.max(1, Math.ceil(total / limit));
  const links = pageLinks(ctx, { page, limit }, total);
  return { data, pagination: { page, limit, total, total_pages: totalPages }, _links: links };
}

export interface PaginateOptions {
  /**
   * The exact counter (shared/queries/counters.ts) whose value is this query's total: for a list
   * whose default filter a counter's predicate states (e.g. `users_live`), or one key of a keyed
   * counter for a list whose only filter is that column equal to that key (`{ keyed:
   * 'gps_points_by_device', key: deviceId }`), or a parent's stored count (`gps_points_by_trip`), or
   * a read of an exact total that costs about what a counter does (a `TotalRead`, such as
   * `tripPointsOfDevice`). A query with no WHERE uses its table's whole-table counter without being
   * told.
   */
  counter?: RowCounter | { keyed: ParentCounter; key: string } | TotalRead;
}

/** The read of `counter`'s value: a row_counters name, a parent's stored count, or a total read as given. */
function counterRead(counter: NonNullable<PaginateOptions['counter']>, table: string): TotalRead {
  if (typeof counter === 'string') return { sql: COUNTER_SQL, bindings: [counter] };
  if ('sql' in counter) return counter;
  if (parentCounterOf(counter.keyed).table !== table)
    throw new Error(`readPage(${table}): counter ${counter.keyed} does not count ${table}`);
  if (counter.keyed in STORED_COUNTS) {
    const stored = STORED_COUNTS[counter.keyed as StoredCount];
    return { sql: stored.sql(`?::${stored.keyType}`), bindings: [counter.key] };
  }
  return {
    sql: COUNTER_SQL,
    bindings: [keyedCounterName({ keyed: counter.keyed as KeyedRowCounter, key: counter.key })],
  };
}

/** Column alias of the total read in the page's own statement. */
const TOTAL = '__page_total';

/**
 * From this offset on, a page whose total is a counter is read from the nearer end of the list: a
 * page past the middle is read in the reversed order at the offset from the end, then turned
 * round. OFFSET walks every row it skips, so the last page of GET /v1/gps (1,000,000 points) walked
 * 999,990 index entries (0.3–0.9 s); read from the end it skips none.
 */
const DEEP_OFFSET = 1000;

/** The knex statements of a query's ORDER BY (knex keeps them as `_statements`). */
interface OrderStatement {
  grouping: string;
  type: string;
  value: unknown;
  direction?: string;
  nulls?: string;
}

/**
 * The query's order, reversed, as `ORDER BY` SQL with its bindings; undefined when it cannot be
 * reversed exactly: no order, an explicit NULLS placement, a raw term it cannot read, or an order
 * that does not end in the primary key (ties would come back in another order). Reversing a term's
 * direction with PostgreSQL's default NULLS placement (last ascending, first descending) reverses
 * its NULLs too.
 */
function reversedOrder(query: QueryBuilder<Model, Model[]>): string | undefined {
  const statements = (query.toKnexQuery() as unknown as { _statements: OrderStatement[] })._statements.filter(
    (st) => st.grouping === 'order',
  );
  const terms: string[] = [];
  for (const st of statements) {
    if (st.nulls) return undefined;
    if (
      st.type === 'orderByBasic' &&
      typeof st.value === 'string' &&
      /^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$/.test(st.value)
    ) {
      const quoted = st.value
        .split('.')
        .map((part) => `"${part}"`)
        .join('.');
      terms.push(`${quoted} ${String(st.direction ?? 'asc').toLowerCase() === 'desc' ? 'ASC' : 'DESC'}`);
    } else if (st.type === 'orderByRaw') {
      const raw = st.value as { sql?: unknown; bindings?: unknown[] };
      if (typeof raw.sql !== 'string' || raw.bindings?.length) return undefined;
      for (const term of splitTopLevel(raw.sql)) {
        const m = /^(.*?)(?:\s+(asc|desc))?$/i.exec(term.trim());
        if (!m || /\bnulls\b|\?/i.test(term)) return undefined;
        terms.push(`${m[1]} ${m[2]?.toLowerCase() === 'desc' ? 'ASC' : 'DESC'}`);
      }
    } else return undefined;
  }
  const last = terms.at(-1)?.replace(/\s+(ASC|DESC)$/, '');
  const table = query.modelClass().tableName;
  const idColumn = query.modelClass().idColumn;
  if (typeof idColumn !== 'string' || ![idColumn, `"${idColumn}"`, `"${table}"."${idColumn}"`].includes(last ?? ''))
    return undefined;
  return terms.join(', ');
}

/** Splits `a, lower(b), c` at the commas outside parentheses. */
function splitTopLevel(sql: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      out.push(sql.slice(start, i));
      start = i + 1;
    }
  }
  out.push(sql.slice(start));
  return out;
}

/**
 * The rows of `query` at `limit`/`offset`, read as a deferred join when the offset is deep
 * (DEEP_OFFSET) and the query is one table's rows: the page's keys first (`SELECT id … ORDER BY …
 * LIMIT … OFFSET …`, which an index holding the order and the key walks without visiting the rows it
 * skips), then those rows by primary key, one LATERAL read per key, in the query's order. Reading
 * whole rows through OFFSET fetched every skipped row from the table: GET /v1/gps at offset 500,000
 * read about 211,000 buffers (5,800 this way). Queries with their own select, joins, grouping or eager loading page as they
 * are.
 */
function deferredPage<M extends Model>(
  query: QueryBuilder<M, M[]>,
  limit: number,
  offset: number,
): QueryBuilder<M, M[]> {
  const model = query.modelClass();
  const id = model.idColumn;
  if (
    offset < DEEP_OFFSET ||
    typeof id !== 'string' ||
    query.hasWithGraph() ||
    query.has(/select|join|distinct|group|having|from|with|union|modify/i)
  )
    return query.clone().limit(limit).offset(offset);
  const knex = query.knex();
  const table = model.tableName;
  const keys = query
    .clone()
    .select(knex.raw('??.?? AS __key', [table, id]))
    .limit(limit)
    .offset(offset)
    .toKnexQuery();
  // The keys' subquery holds the filter; the rows are read by key under the table's own name, so
  // the order's terms name their columns (the keys' only column is __key). OFFSET 0 keeps each
  // row's read a lookup by key: pulled up, a plan that misjudges the keys' number may join them to
  // a scan of the whole table. Planned for its offset, not as a generic plan (PLANNED_PER_VALUES).
  return query
    .clone()
    .clearWhere()
    .from(
      knex.raw(
        `? AS __keys CROSS JOIN LATERAL (SELECT * FROM ?? WHERE ??.?? = __keys.__key OFFSET 0) AS ?? ${PLANNED_PER_VALUES}`,
        [keys, table, table, id, table],
      ),
    );
}

/**
 * A page past the middle of a list whose total is a counter (`counter`: the read of its value),
 * read from the end (DEEP_OFFSET); undefined when the
 * page is nearer the start, or the order cannot be reversed. Two statements: the counter, then the
 * rows.
 */
async function readPageFromEnd<M extends Model>(
  query: QueryBuilder<M, M[]>,
  page: Page,
  counter: TotalRead,
  knex: Knex,
): Promise<{ results: M[]; total: number } | undefined> {
  const offset = (page.page - 1) * page.limit;
  const reversed = reversedOrder(query as unknown as QueryBuilder<Model, Model[]>);
  if (!reversed) return undefined;
  const [r] = (await queryOncePerTurn(
    knex,
    knex.select(knex.raw(`${counter.sql} AS ${TOTAL}`, counter.bindings)),
  )) as Array<Record<string, unknown>>;
  const total = Number(r[TOTAL]);
  if (offset >= total) return { results: [], total };
  const after = total - offset - page.limit;
  if (after >= offset) return undefined;
  const paged = deferredPage(
    query
      .clone()
      .clear(/orderBy|offset|limit/)
      .orderByRaw(reversed),
    Math.min(page.limit, total - offset),
    Math.max(0, after),
  );
  if (!query.has(/select/i)) paged.select(`${query.modelClass().tableName}.*`);
  const rows = await pageRows(paged, knex);
  return { results: rows.reverse(), total };
}

/**
 * One page of an Objection query and the total of its matches, from one statement: the total is a
 * scalar subquery of the page's statement (evaluated once, from the same snapshot). When the total
 * is a maintained counter (see PaginateOptions) it is the counter's read; otherwise a COUNT over the
 * query without its order and page. Only a page past the end costs a second statement (the total
 * alone). REST (`paginate`) and GraphQL pages both read this way.
 */
export async function readPage<M extends Model>(
  query: QueryBuilder<M, M[]>,
  page: Page,
  opts: PaginateOptions = {},
): Promise<{ results: M[]; total: number }> {
  const model = query.modelClass();
  const knex = query.knex();
  const named = opts.counter ?? (query.has(/where/i) ? undefined : wholeTableCounter(model.tableName));
  const counter = named === undefined ? undefined : counterRead(named, model.tableName);
  if (counter && (page.page - 1) * page.limit >= DEEP_OFFSET) {
    const fromEnd = await readPageFromEnd(query, page, counter, knex);
    if (fromEnd) return fromEnd;
  }
  let total: Knex.Raw;
  if (counter) total = knex.raw(`${counter.sql} AS ${TOTAL}`, counter.bindings);
  else {
    const matches = query.clone().clear(/orderBy|offset|limit/);
    // Without a select of its own (or grouping), the count needs no columns.
    if (!query.has(/select|distinct|groupBy/i)) matches.select(knex.raw('1'));
    const { sql, bindings } = matches.toKnexQuery().toSQL();
    total = knex.raw(`(SELECT count(*) FROM (${sql}) AS matches) AS ${TOTAL}`, bindings as Knex.RawBinding[]);
  }
  const paged = deferredPage(query, page.limit, (page.page - 1) * page.limit);
  if (query.has(/select/i)) paged.select(total);
  else paged.select(`${model.tableName}.*`, total);
  const rows = (await pageRows(paged, knex)) as Array<M & { [TOTAL]?: string | number }>;
  let n: number;
  if (rows.length) {
    n = Number(rows[0][TOTAL]);
    for (const r of rows) delete r[TOTAL];
  } else {
    // Past the last page (an empty list, most often): the total alone, shared like the page.
    const [r] = (await queryOncePerTurn(knex, knex.select(total))) as Array<Record<string, unknown>>;
    n = Number(r[TOTAL]);
  }
  return { results: rows, total: n };
}

/**
 * The page's rows. Outside a transaction, identical pages asked for in one turn (the same SQL and
 * bindings: the first page of a busy list) are one statement (readOncePerTurn), each caller with
 * its own model instances. Queries that load relations or run hooks after the read take the
 * model's own path.
 */
async function pageRows<M extends Model>(paged: QueryBuilder<M, M[]>, knex: Knex): Promise<M[]> {
  if ((knex as Knex.Transaction).isTransaction || paged.hasWithGraph() || paged.has(/^run(After|Before)$|^onBuild/))
    return paged;
  const model = paged.modelClass();
  // A copy per caller: the model layer may parse JSON attributes in place.
  return (await queryOncePerTurn(knex, paged.toKnexQuery())).map((r) => model.fromDatabaseJson({ ...r }) as M);
}

/** Runs an Objection query one page at a time (readPage, one statement) and presents it. */
export async function paginate<M extends Model, T>(
  ctx: Context,
  query: QueryBuilder<M, M[]>,
  page: Page,
  present: (row: M) => T,
  opts: PaginateOptions = {},
): Promise<Paginated<T>> {
  const { results, total } = await readPage(query, page, opts);
  return paginatedBody(ctx, results.map(present), total, page);
}
