import type { Knex } from 'knex';
import { AuditEvent } from '../models/AuditEvent';
import { isUuid } from '../zod';

/** Sort fields of GET /v1/admin/audit (spec §4.24); every one is served by an index ending in (created_at, id). */
export const AUDIT_SORT_FIELDS = ['event_type', 'user_id', 'status', 'created_at'] as const;
export type AuditSortField = (typeof AUDIT_SORT_FIELDS)[number];

/** The filters of the audit lists, validated (api/routes/audit.ts). */
export interface AuditFilter {
  user_id?: string;
  event_type?: string;
  resource_type?: string;
  status?: 'success' | 'failure';
  source_service?: string;
  user_search?: string;
  start_date?: Date;
  end_date?: Date;
  is_reported?: boolean;
  sort_field?: AuditSortField;
  sort_direction?: 'asc' | 'desc';
}

/**
 * Counts are exact up to this many matching events; beyond it the total is the planner's estimate
 * (flagged with X-Total-Count-Estimated), so a page never pays for counting a million rows.
 */
export const AUDIT_COUNT_CAP = 10_000;
/** An estimate this many times the cap is trusted without counting (estimates are rarely off by 10×). */
const ESTIMATE_TRUST = 10;
/** Most users one user_search matches (a search matching more is too broad to be useful anyway). */
const USER_SEARCH_MAX = 500;

export interface AuditPage {
  events: AuditEvent[];
  total: number;
  estimated: boolean;
}

/**
 * The user ids a user_search names: the text itself (an id, also an external one a bot wrote), and
 * users whose id equals it or whose username or any platform account email contains it (case-insensitive).
 */
async function searchUserIds(db: Knex, q: string): Promise<string[]> {
  const like = `%${q.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const { rows } = await db.raw<{ rows: Array<{ id: string }> }>(
    `SELECT id::text FROM users WHERE lower(username) LIKE ?
     UNION SELECT user_id::text FROM platform_accounts WHERE lower(email) LIKE ?
     LIMIT ?`,
    [like, like, USER_SEARCH_MAX],
  );
  const ids = new Set(rows.map((r) => r.id));
  ids.add(isUuid(q) ? q.toLowerCase() : q);
  return [...ids];
}

/** The filtered query (no order, no page), wrapped: a query builder is a thenable an await would run. */
async function filtered(db: Knex, f: AuditFilter): Promise<{ q: Knex.QueryBuilder }> {
  const q = db('audit_events');
  if (f.user_id !== undefined) q.where('user_id', isUuid(f.user_id) ? f.user_id.toLowerCase() : f.user_id);
  if (f.event_type !== undefined) q.where('event_type', f.event_type);
  if (f.resource_type !== undefined) q.where('resource_type', f.resource_type);
  if (f.status !== undefined) q.where('status', f.status);
  if (f.source_service !== undefined) q.where('source_service', f.source_service);
  if (f.is_reported !== undefined) q.where('is_reported', f.is_reported);
  if (f.start_date) q.where('created_at', '>=', f.start_date);
  if (f.end_date) q.where('created_at', '<=', f.end_date);
  if (f.user_search !== undefined) {
    const ids = await searchUserIds(db, f.user_search);
    q.whereIn('user_id', ids);
  }
  return { q };
}

/** The planner's row estimate of a query (EXPLAIN, no execution). */
async function estimateRows(db: Knex, q: Knex.QueryBuilder): Promise<number> {
  const { sql, bindings } = q.clone().select(db.raw('1')).toSQL();
  const { rows } = await db.raw<{ rows: Array<{ 'QUERY PLAN': Array<{ Plan: { 'Plan Rows': number } }> }> }>(
    `EXPLAIN (FORMAT JSON) ${sql}`,
    bindings as Knex.RawBinding[],
  );
  return Math.round(rows[0]!['QUERY PLAN'][0]!.Plan['Plan Rows']);
}

/**
 * One page of audit events, newest first unless sorted otherwise (ties broken by created_at, then
 * id, in the same direction, so every sort walks one index). The count is exact up to
 * AUDIT_COUNT_CAP matches and estimated beyond (never below the cap + 1); when the planner already
 * expects ten times the cap, no counting happens at all.
 */
export async function findAuditPage(
  db: Knex,
  f: AuditFilter,
  page: { page: number; limit: number },
): Promise<AuditPage> {
  const { q: base } = await filtered(db, f);
  const dir = f.sort_direction ?? 'desc';
  const field = f.sort_field ?? 'created_at';
  const order = field === 'created_at' ? ['created_at', 'id'] : [field, 'created_at', 'id'];
  const rowsQ = base
    .clone()
    .select('*')
    .orderBy(order.map((column) => ({ column, order: dir })))
    .limit(page.limit)
    .offset((page.page - 1) * page.limit);
  // The planner's estimate comes first (no execution): far above the cap, counting is skipped.
  const [rows, guess] = await Promise.all([rowsQ, estimateRows(db, base)]);
  let total: number;
  let estimated = false;
  if (guess > AUDIT_COUNT_CAP * ESTIMATE_TRUST) {
    total = guess;
    estimated = true;
  } else {
    const counted = await db
      .from(
        base
          .clone()
          .select(db.raw('1'))
          .limit(AUDIT_COUNT_CAP + 1)
          .as('capped'),
      )
      .count<Array<{ count: string }>>({ count: '*' });
    total = Number(counted[0]!.count);
    if (total > AUDIT_COUNT_CAP) {
      total = Math.max(AUDIT_COUNT_CAP + 1, guess);
      estimated = true;
    }
  }
  return {
    events: (rows as Array<Record<string, unknown>>).map((r) => AuditEvent.fromDatabaseJson(r)),
    total,
    estimated,
  };
}
