import type { Context } from 'koa';
import type { QueryBuilder, Model } from 'objection';
import { z, zQueryInt } from '../shared/zod';

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
function paginatedBody<T>(ctx: Context, data: T[], total: number, { page, limit }: Page): Paginated<T> {
  const totalPages = Math.max(1, Math.ceil(total / limit));
  const links = pageLinks(ctx, { page, limit }, total);
  return { data, pagination: { page, limit, total, total_pages: totalPages }, _links: links };
}

/** Runs an Objection query one page at a time (a COUNT and a LIMIT/OFFSET query) and presents it. */
export async function paginate<M extends Model, T>(
  ctx: Context,
  query: QueryBuilder<M, M[]>,
  page: Page,
  present: (row: M) => T,
): Promise<Paginated<T>> {
  const { results, total } = await query.page(page.page - 1, page.limit);
  return paginatedBody(ctx, results.map(present), total, page);
}
