import { GraphQLScalarType, Kind, ValueNode } from 'graphql';
import type { Model, QueryBuilder } from 'objection';
import { ArgsType, ClassType, Field, Int, ObjectType } from 'type-graphql';
import { badRequest } from '../../shared/errors';
import { PaginateOptions, readPage } from '../pagination';

/** The `pagination` object of REST pages (api/pagination.ts), in camelCase. */
@ObjectType('Pagination', { simpleResolvers: true })
export class GqlPagination {
  @Field(() => Int) page!: number;
  @Field(() => Int) limit!: number;
  @Field(() => Int) total!: number;
  @Field(() => Int) totalPages!: number;
}

/**
 * `page` and `limit` of a list (limit at most 100, as on REST), with the default of its REST twin
 * (spec §8): 20 for trips and users (PageArgs), 10 for devices, geofences and locations
 * (SmallPageArgs), so a client switching between the two gets the same pages.
 */
@ArgsType()
export class PageArgs {
  @Field(() => Int, { defaultValue: 1, description: 'From 1' })
  page: number = 1;

  @Field(() => Int, { defaultValue: 20, description: '1 to 100' })
  limit: number = 20;
}

/** `page` and `limit` of a list whose REST twin pages 10 by default (see PageArgs). */
@ArgsType()
export class SmallPageArgs {
  @Field(() => Int, { defaultValue: 1, description: 'From 1' })
  page: number = 1;

  @Field(() => Int, { defaultValue: 10, description: '1 to 100' })
  limit: number = 10;
}

/** A page type: `data` and `pagination`, like a REST page without `_links`. */
export function PageOf<T extends object>(item: ClassType<T>) {
  @ObjectType({ simpleResolvers: true, isAbstract: true })
  abstract class Page {
    @Field(() => [item]) data!: T[];
    @Field(() => GqlPagination) pagination!: GqlPagination;
  }
  return Page;
}

/**
 * Runs an Objection query one page at a time (one statement, `readPage`), as REST does, with the
 * same exact counter as the REST list (`opts.counter`) for a filtered list.
 */
export async function pageOf<M extends Model, T>(
  query: QueryBuilder<M, M[]>,
  args: PageArgs,
  present: (row: M) => T,
  opts: PaginateOptions = {},
): Promise<{ data: T[]; pagination: GqlPagination }> {
  const { page, limit } = checkPage(args);
  const { results, total } = await readPage(query, { page, limit }, opts);
  return {
    data: results.map(present),
    pagination: { page, limit, total, totalPages: Math.max(1, Math.ceil(total / limit)) },
  };
}

function checkPage(args: PageArgs): PageArgs {
  if (!Number.isInteger(args.page) || args.page < 1 || args.page > 1_000_000)
    throw badRequest('page: must be an integer from 1 to 1000000');
  if (!Number.isInteger(args.limit) || args.limit < 1 || args.limit > 100)
    throw badRequest('limit: must be an integer from 1 to 100');
  return args;
}

/**
 * Rows an offset skips per point of query cost. The database reads every row it skips (an index
 * entry and, for most lists, the row), about a tenth of what a returned field costs to read and
 * answer: 95 aliased `devices(page: 480+N, limit: 100)` pages, priced at what they returned, were
 * accepted and skipped 5 million rows in 1.45 s.
 */
export const SKIPPED_ROWS_PER_COST = 10;

/**
 * The most one list field's skipped rows cost: half of MAX_QUERY_COST (api/graphql/index.ts), so
 * one page at any depth is answered, as REST answers it (and lists with a row counter read a deep
 * page from their nearer end), while aliases cannot multiply deep pages.
 */
export const MAX_SKIP_COST = 10_000;

/** Rows a list field's arguments skip before its page: `(page - 1) × limit`, or `offset`. */
function skippedRows(args: Record<string, unknown>, perPage: number): number {
  const page = Number(args.page ?? 1);
  const skipped = Number.isFinite(page) && page > 1 ? (page - 1) * perPage : Number(args.offset ?? 0);
  return Number.isFinite(skipped) && skipped > 0 ? skipped : 0;
}

/**
 * Query cost of a list field: its items' cost times how many it may return (the `limit` or
 * `first` argument, else `fallback`), so `trips(limit: 100) { gpsPoints(first: 1000) {…} }` is
 * priced at what it would read; plus the rows its `page` (or `offset`) skips, one point per
 * SKIPPED_ROWS_PER_COST of them, at most MAX_SKIP_COST.
 */
export const listCost =
  (fallback: number) =>
  ({ args, childComplexity }: { args: Record<string, unknown>; childComplexity: number }): number => {
    const n = Number(args.limit ?? args.first ?? fallback);
    const perPage = Number.isFinite(n) && n > 0 ? n : fallback;
    const skip = Math.min(MAX_SKIP_COST, Math.ceil(skippedRows(args, perPage) / SKIPPED_ROWS_PER_COST));
    return 1 + childComplexity * perPage + skip;
  };

function literal(ast: ValueNode): unknown {
  switch (ast.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
      return ast.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(ast.value);
    case Kind.OBJECT:
      return Object.fromEntries(ast.fields.map((f) => [f.name.value, literal(f.value)]));
    case Kind.LIST:
      return ast.values.map(literal);
    default:
      return null;
  }
}

/** Free-form JSON (a geofence's metadata), shown as REST shows it. */
export const JSONScalar = new GraphQLScalarType({
  name: 'JSON',
  description: 'Any JSON value',
  serialize: (v) => v,
  parseValue: (v) => v,
  parseLiteral: literal,
});
