import type { Context } from 'koa';
import type { Knex } from 'knex';
import type { QueryBuilder, Model } from 'objection';
import { z, zQueryInt } from '../shared/zod';
import { COUNTER_SQL, RowCounter, wholeTableCounter } from '../shared/queries/counters';
import { queryOncePerTurn } from '../shared/rowLoader';

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

/** The _links of one page, keeping the request's other query fields. */
export function pageLinks(ctx: Context, { page, limit }: Page, total: number): Paginated<unknown>['_links'] {
  const totalPages = Math.max(1, Math.ceil(total / limit));
  const link = (p: number) => {
    const q = new URLSearchParams(ctx.querystring);
    q.set('page', String(p));
    q.set('limit', String(limit));
    return `${ctx.path}?${q.toString()}`;
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
   * whose default filter a counter's predicate states (e.g. `users_live`). A query with no WHERE
   * uses its table's whole-table counter without being told.
   */
  counter?: RowCounter;
}

/** Column alias of the total read in the page's own statement. */
const TOTAL = '__page_total';

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
  const counter = opts.counter ?? (query.has(/where/i) ? undefined : wholeTableCounter(model.tableName));
  let total: Knex.Raw;
  if (counter) total = knex.raw(`${COUNTER_SQL} AS ${TOTAL}`, [counter]);
  else {
    const matches = query.clone().clear(/orderBy|offset|limit/);
    // Without a select of its own (or grouping), the count needs no columns.
    if (!query.has(/select|distinct|groupBy/i)) matches.select(knex.raw('1'));
    const { sql, bindings } = matches.toKnexQuery().toSQL();
    total = knex.raw(`(SELECT count(*) FROM (${sql}) AS matches) AS ${TOTAL}`, bindings as Knex.RawBinding[]);
  }
  const paged = query.clone();
  if (query.has(/select/i)) paged.select(total);
  else paged.select(`${model.tableName}.*`, total);
  paged.limit(page.limit).offset((page.page - 1) * page.limit);
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
