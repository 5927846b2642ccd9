import type { Knex } from 'knex';
import { AuditEvent } from '../models/AuditEvent';
import { isUuid } from '../zod';
import { computeOncePerTurn, pagesOf, queryOncePerTurn, withoutColumns } from '../rowLoader';
import { CAPPED_TOTAL, COUNTER_SQL, readCappedPage } from './counters';
import { PLANNED_PER_VALUES } from '../preparedStatements';

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
 * Filtered counts are exact up to this many matching events; beyond it the total is the planner's
 * estimate (flagged with X-Total-Count-Estimated), so a page never pays for counting a million rows.
 */
export const AUDIT_COUNT_CAP = 10_000;

export interface AuditPage {
  events: AuditEvent[];
  total: number;
  estimated: boolean;
}

/**
 * Most usernames, and most platform account email addresses, whose ids a user_search passes to the
 * page as values (docs/audit.md). A broader text is searched whole as a subquery instead.
 */
export const USER_SEARCH_MAX_MATCHES = 1000;

/**
 * The user ids a user_search names: the text itself as a user id (also an external one a bot
 * wrote) when events carry it, and every user whose username or any platform account email
 * contains the text (case-insensitive). Read once, in a statement of their own (each side stops
 * one match past the cap; a text of three or more characters is matched through the trigram
 * indexes of migration 20261124020000_audit_log), and sorted, so identical searches send
 * identical statements. Undefined when a side matches more than the cap.
 */
async function userSearchIds(db: Knex, like: string, asId: string): Promise<string[] | undefined> {
  const { rows } = await db.raw<{ rows: Array<{ by_id: boolean; by_name: string[]; by_email: string[] }> }>(
    `SELECT EXISTS (SELECT 1 FROM audit_events WHERE user_id = ?) AS by_id,
            ARRAY(SELECT id::text FROM users WHERE lower(username) LIKE ? LIMIT ?::int) AS by_name,
            ARRAY(SELECT user_id::text FROM platform_accounts WHERE lower(email) LIKE ? LIMIT ?::int) AS by_email`,
    [asId, like, USER_SEARCH_MAX_MATCHES + 1, like, USER_SEARCH_MAX_MATCHES + 1],
  );
  const { by_id: byId, by_name: byName, by_email: byEmail } = rows[0]!;
  if (byName.length > USER_SEARCH_MAX_MATCHES || byEmail.length > USER_SEARCH_MAX_MATCHES) return undefined;
  return [...new Set([...(byId ? [asId] : []), ...byName, ...byEmail])].sort();
}

/**
 * The events of a user_search: of its users (userSearchIds), given to the page's statement as
 * values, so the planner sees how many users there are and how common their events are. One user
 * is an equality, whose events come off the (user_id, created_at, id) index in order, the page and
 * no more; a few users' events come off that index and are sorted; many users' off the sort's own
 * index, walked until the page is full. As a subquery (`user_id = ANY(ARRAY(SELECT …))`, known
 * only at run time) the planner assumes a handful of users whatever the text, and reads every
 * matching event by user and sorts them: a broad text (a letter, a mail domain most users share)
 * still gets that plan, slower (0.2–0.6 s at 100,000 matching events) but whole, never cut short.
 */
async function whereUserSearch(db: Knex, q: Knex.QueryBuilder, text: string): Promise<void> {
  const like = `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const asId = isUuid(text) ? text.toLowerCase() : text;
  const ids = await userSearchIds(db, like, asId);
  if (ids === undefined)
    q.whereRaw(
      `user_id = ANY(ARRAY(SELECT ?::text UNION SELECT id::text FROM users WHERE lower(username) LIKE ?
         UNION SELECT user_id::text FROM platform_accounts WHERE lower(email) LIKE ?))`,
      [asId, like, like],
    );
  else if (ids.length === 0) q.whereRaw('false');
  else if (ids.length === 1) q.where('user_id', ids[0]!);
  else q.whereRaw('user_id = ANY(?::text[])', [ids]);
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
  // Events are shown to the millisecond and stored to the microsecond: an end bound includes its
  // whole millisecond, so the created_at of an event, passed back as end_date, finds that event.
  if (f.end_date) q.where('created_at', '<', new Date(f.end_date.getTime() + 1));
  if (f.user_search !== undefined) await whereUserSearch(db, q, f.user_search);
  return { q };
}

/** Column alias of the total read in the page's own statement. */
const TOTAL = '__audit_total';

/** What a page row holds beyond the event's columns. */
const PAGE_COLUMNS: ReadonlySet<string> = new Set([TOTAL, CAPPED_TOTAL]);

/**
 * One page of audit events, newest first unless sorted otherwise (ties broken by created_at, then
 * id, in the same direction, so every sort walks one index).
 *
 * Without filters the total is the exact `audit_events` row counter, read in the page's own
 * statement. With filters it is a count capped at AUDIT_COUNT_CAP + 1 matches, also in the page's
 * statement, which reads one event past the page; only when the cap is reached does the planner's
 * estimate (EXPLAIN, a second statement) give the total, flagged as estimated (never below the cap
 * + 1), and then only on a page that does not end the list: the last page's total is exact
 * (readCappedPage in ./counters). So the usual page is one round trip.
 */
export function findAuditPage(db: Knex, f: AuditFilter, page: { page: number; limit: number }): Promise<AuditPage> {
  // Identical pages asked for in one turn (a dashboard's first page, polled by many) are built once.
  return samePage(db, JSON.stringify([f, page]), () => readAuditPage(db, f, page));
}

const samePage = computeOncePerTurn<AuditPage>();

/**
 * A user's events, newest first, for every user asked for in one turn with the same page: one
 * statement (a LATERAL page per user, the exact total from the user's keyed row counter) instead
 * of one per user, and no count over a user's events however many there are.
 */
const userPages = pagesOf(
  AuditEvent,
  'user_id',
  'text',
  [
    ['created_at', 'desc'],
    ['id', 'desc'],
  ],
  { counter: 'audit_events_by_user' },
);

/** Only the user filter, newest first: what /v1/users/{id}/audit asks without filters. */
const onlyUser = (f: AuditFilter) =>
  f.user_id !== undefined &&
  (f.sort_field ?? 'created_at') === 'created_at' &&
  (f.sort_direction ?? 'desc') === 'desc' &&
  Object.entries(f).every(
    ([k, v]) => v === undefined || k === 'user_id' || k === 'sort_field' || k === 'sort_direction',
  );

async function readAuditPage(db: Knex, f: AuditFilter, page: { page: number; limit: number }): Promise<AuditPage> {
  if (onlyUser(f)) {
    const userId = isUuid(f.user_id) ? f.user_id.toLowerCase() : f.user_id!;
    const { results, total } = await userPages.load(db, userId, page.limit, (page.page - 1) * page.limit);
    return { events: results, total, estimated: false };
  }
  const { q: base } = await filtered(db, f);
  const dir = f.sort_direction ?? 'desc';
  const field = f.sort_field ?? 'created_at';
  const order = field === 'created_at' ? ['created_at', 'id'] : [field, 'created_at', 'id'];
  const unfiltered = Object.entries(f).every(
    ([k, v]) => v === undefined || k === 'sort_field' || k === 'sort_direction',
  );
  const offset = (page.page - 1) * page.limit;
  // Identical pages asked for in one turn share the statement (the rows are shared: not changed here).
  const pageRows = (total: Knex.Raw, limit: number) =>
    queryOncePerTurn(
      db,
      base
        .clone()
        .select('*', total)
        .orderBy(order.map((column) => ({ column, order: dir })))
        .limit(limit)
        .offset(offset),
    );
  const events = (rows: ReadonlyArray<Readonly<Record<string, unknown>>>) =>
    rows.map((row) => AuditEvent.fromDatabaseJson(withoutColumns(row, PAGE_COLUMNS)));
  if (!unfiltered) {
    // Counted up to the cap, then estimated; one row past the page keeps `next` exact (readCappedPage).
    const read = await readCappedPage(db, () => base.clone(), { limit: page.limit, offset }, AUDIT_COUNT_CAP, pageRows);
    return { events: events(read.rows), total: read.total, estimated: read.estimated };
  }
  if (offset >= DEEP_OFFSET) {
    const fromEnd = await readAuditPageFromEnd(db, base, order, dir, page);
    if (fromEnd) return fromEnd;
  }
  const totalSql = db.raw(`${COUNTER_SQL} AS ${TOTAL}`, ['audit_events']);
  const rows = await (offset >= DEEP_OFFSET
    ? queryOncePerTurn(db, deferredPage(db, base, order, dir, page.limit, offset, totalSql))
    : pageRows(totalSql, page.limit));
  let total: number;
  if (rows.length) total = Number(rows[0]![TOTAL]);
  else {
    // Past the last page (or no events at all): the counter alone.
    const [r] = (await db.select(totalSql)) as Array<Record<string, unknown>>;
    total = Number(r![TOTAL]);
  }
  return { events: events(rows), total, estimated: false };
}

/** From this offset on, an unfiltered page past the middle is read from the end (as api/pagination.ts does). */
const DEEP_OFFSET = 1000;

/**
 * An unfiltered deep page as a deferred join: its ids come off the sort's index alone (every sort
 * has an index ending in (created_at, id)), skipping `offset` index entries, and only the page's
 * rows are read, by primary key. Read whole, OFFSET fetched every skipped event from the heap: the
 * middle of 500,000 events (offset 249,900) took 130 ms, 29 ms so. Planned for its offset
 * (PLANNED_PER_VALUES), as api/pagination.ts's deferred joins are. Only unfiltered: with a filter
 * the filter's index walk read more pages than the heap walk it replaced (status: 55 against 35 ms).
 */
function deferredPage(
  db: Knex,
  base: Knex.QueryBuilder,
  order: string[],
  dir: 'asc' | 'desc',
  limit: number,
  offset: number,
  total?: Knex.Raw,
): Knex.QueryBuilder {
  const keys = base
    .clone()
    .select('id')
    .orderBy(order.map((column) => ({ column, order: dir })))
    .limit(limit)
    .offset(offset)
    .as('k');
  return db
    .select(db.raw('e.*'), ...(total ? [total] : []))
    .from(keys)
    .joinRaw(`CROSS JOIN LATERAL (SELECT * FROM audit_events WHERE id = k.id OFFSET 0) e ${PLANNED_PER_VALUES}`)
    .orderBy(order.map((column) => ({ column: `e.${column}`, order: dir })));
}

/**
 * An unfiltered page past the middle of the events, read in the reversed order at its offset from
 * the end (the exact counter gives the total), then turned round: OFFSET walks every entry it
 * skips, so the last of 10,000 pages of 50 walked 500,000 index entries (0.45 s). Undefined when
 * the page is nearer the start. Every term of the order has the same direction and PostgreSQL's
 * default NULLS placement, so flipping the direction reverses the order exactly.
 */
async function readAuditPageFromEnd(
  db: Knex,
  base: Knex.QueryBuilder,
  order: string[],
  dir: 'asc' | 'desc',
  page: { page: number; limit: number },
): Promise<AuditPage | undefined> {
  const offset = (page.page - 1) * page.limit;
  const [r] = (await queryOncePerTurn(db, db.select(db.raw(`${COUNTER_SQL} AS ${TOTAL}`, ['audit_events'])))) as Array<
    Record<string, unknown>
  >;
  const total = Number(r![TOTAL]);
  if (offset >= total) return { events: [], total, estimated: false };
  const after = total - offset - page.limit;
  if (after >= offset) return undefined;
  const rows = (await queryOncePerTurn(
    db,
    deferredPage(
      db,
      base,
      order,
      dir === 'desc' ? 'asc' : 'desc',
      Math.min(page.limit, total - offset),
      Math.max(0, after),
    ),
  )) as Array<Record<string, unknown>>;
  return {
    // A copy: the rows may be shared with identical pages of this turn.
    events: [...rows].reverse().map((row) => AuditEvent.fromDatabaseJson(row)),
    total,
    estimated: false,
  };
}
