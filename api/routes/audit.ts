import Router from '@koa/router';
import type { Knex } from 'knex';
import { RECORDED_EVENT_TYPES, SOURCE_SERVICES } from '../../shared/audit';
import { createAuditReport, reviewAuditReport } from '../../shared/commands/auditReports';
import { badRequest } from '../../shared/errors';
import { AUDIT_REPORT_REASONS, AUDIT_REPORT_STATUSES, AuditReport } from '../../shared/models/AuditReport';
import { auditPageSchema, presentAuditPage } from '../../shared/presenters/auditEvent';
import { auditReportCreatedSchema, auditReportSchema, presentAuditReport } from '../../shared/presenters/auditReport';
import { ACCOUNT_SCOPES } from '../../shared/policies';
import { AUDIT_SORT_FIELDS, AuditFilter, findAuditPage } from '../../shared/queries/audit';
import { queryOncePerTurn } from '../../shared/rowLoader';
import { calendarDayExists, z, zChars, zQueryBool, zUuid } from '../../shared/zod';
import { pageLinks, paginationQuery } from '../pagination';
import { sharedJson } from '../responses';
import { loadUser, requireActingUser } from '../params';
import { AppContext, AppState, defineRoute, requestAttribution } from '../routing';
import type { ApiServices } from '../services';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['audit'];

const oneOf = <T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { errorMap: () => ({ message: `must be one of ${values.join(', ')}` }) });

/**
 * ISO 8601 date or date-time; a bare date as end_date means the end of that day, and a date-time
 * without an offset is UTC too (never the server's own time zone).
 */
const ISO_DATE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/i;
const zQueryDate = (endOfDay: boolean) =>
  z
    .string()
    .refine((v) => ISO_DATE.test(v) && !Number.isNaN(Date.parse(v)), 'must be an ISO 8601 date or date-time')
    // Date.parse rolls an impossible day over (2026-02-30 is 2 March): the calendar day must exist.
    .refine((v) => !ISO_DATE.test(v) || Number.isNaN(Date.parse(v)) || calendarDayExists(v), 'no such day')
    .transform((v) => {
      if (v.length === 10) return new Date(`${v}T${endOfDay ? '23:59:59.999' : '00:00:00'}Z`);
      return new Date(/(z|[+-]\d{2}:?\d{2})$/i.test(v) ? v : `${v}Z`);
    })
    // Documentation of the refinements above, which the OpenAPI document cannot render.
    .openapi({
      description: `An ISO 8601 date or date-time (YYYY-MM-DD[Thh:mm[:ss[.fff]][Z|±hh:mm]]), UTC unless it has an offset${endOfDay ? '; a bare date means the end of that day' : ''}. Compared at the millisecond precision events are shown with`,
      pattern: '^\\d{4}-\\d{2}-\\d{2}([Tt]\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?([Zz]|[+-]\\d{2}:?\\d{2})?)?$',
    });

/** Filters of /v1/users/me/audit and /v1/users/{user_id}/audit (spec §4.24). */
const userAuditQuery = paginationQuery(20).extend({
  event_type: oneOf(RECORDED_EVENT_TYPES).optional(),
  resource_type: zChars({ min: 1, max: 64 }).optional(),
  status: oneOf(['success', 'failure'] as const).optional(),
});

/** GET /v1/admin/audit adds these. */
const adminAuditQuery = userAuditQuery.extend({
  user_id: zChars({ min: 1, max: 255 }).optional(),
  user_search: zChars({ trim: true, min: 1, max: 320 }).optional(),
  source_service: oneOf(SOURCE_SERVICES).optional(),
  start_date: zQueryDate(false).optional(),
  end_date: zQueryDate(true).optional(),
  sort_field: oneOf(AUDIT_SORT_FIELDS).default('created_at'),
  sort_direction: oneOf(['asc', 'desc'] as const).default('desc'),
  is_reported: zQueryBool().optional(),
});

const pageResponses = {
  200: { description: '{events, total_count, page, limit, total_pages, _links}', schema: auditPageSchema },
  400: { description: 'A bad filter value (the message names the parameter)' },
};

/** Runs the filtered page and answers it; an estimated total is flagged in X-Total-Count-Estimated. */
async function answerPage(
  ctx: AppContext,
  filter: AuditFilter,
  page: { page: number; limit: number },
  /** A check to pass before answering (a 404), read in the same turn as the page. */
  check?: () => Promise<unknown>,
) {
  if (filter.start_date && filter.end_date && filter.start_date > filter.end_date)
    throw badRequest('start_date: must not be after end_date');
  const [, result] = await Promise.all([check?.(), findAuditPage(ctx.services.db, filter, page)]);
  if (result.estimated) ctx.set('X-Total-Count-Estimated', 'true');
  // The turn's callers of one page and URL share its bytes (the page is shared by findAuditPage).
  sharedJson(ctx, result, () =>
    presentAuditPage(result.events, result.total, page, pageLinks(ctx, page, result.total)),
  );
}

/**
 * Reports newest first (at most 1,000); identical lists asked for in one turn share the statement
 * (queryOncePerTurn), each caller with its own models.
 */
async function reportRows(db: Knex, q: ReturnType<typeof AuditReport.query>): Promise<AuditReport[]> {
  q.orderBy([
    { column: 'created_at', order: 'desc' },
    { column: 'id', order: 'desc' },
  ]).limit(1000);
  return (await queryOncePerTurn(db, q.toKnexQuery())).map((r) => AuditReport.fromDatabaseJson({ ...r }));
}

/** Audit and activity log: a user's own events and reports, administrators' search and review (spec §4.24). */
export function auditRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/me/audit',
      summary: 'My activity log',
      tags: TAG,
      auth: { account: ACCOUNT_SCOPES.audit },
      query: userAuditQuery,
      responses: pageResponses,
    },
    async (ctx, { query: { page, limit, ...filter } }) => {
      const userId = requireActingUser(ctx.state.principal);
      await answerPage(ctx, { ...filter, user_id: userId }, { page, limit });
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/me/audit/reports',
      summary: 'My reports of suspicious events',
      tags: TAG,
      auth: { account: ACCOUNT_SCOPES.audit },
      responses: { 200: { description: 'Bare array of reports, newest first', schema: z.array(auditReportSchema) } },
    },
    async (ctx) => {
      const userId = requireActingUser(ctx.state.principal);
      const reports = await reportRows(ctx.services.db, AuditReport.query(ctx.services.db).where('user_id', userId));
      ctx.body = reports.map(presentAuditReport);
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/me/audit/:event_id/report',
      summary: 'Report one of my events as suspicious',
      tags: TAG,
      auth: { account: ACCOUNT_SCOPES.audit },
      params: z.object({ event_id: zUuid() }),
      body: z.object({
        reason: oneOf(AUDIT_REPORT_REASONS),
        description: zChars({ trim: true, max: 2000 }).nullish(),
      }),
      responses: {
        201: { description: '{success, report, error}', schema: auditReportCreatedSchema },
        404: { description: 'No such event among mine' },
        409: { description: 'The event is already reported' },
      },
    },
    async (ctx, { params, body }) => {
      const userId = requireActingUser(ctx.state.principal);
      const report = await createAuditReport(ctx.services, userId, params.event_id, body);
      ctx.status = 201;
      ctx.body = { success: true, report: presentAuditReport(report), error: null };
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/:user_id/audit',
      summary: "A user's activity log",
      tags: TAG,
      auth: { permission: 'audit:read' },
      params: z.object({ user_id: zUuid() }),
      query: userAuditQuery,
      responses: { ...pageResponses, 404: { description: 'No such user' } },
    },
    async (ctx, { params, query: { page, limit, ...filter } }) => {
      await answerPage(ctx, { ...filter, user_id: params.user_id.toLowerCase() }, { page, limit }, () =>
        loadUser(ctx.services.db, params.user_id, { includeDeleted: true }),
      );
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/admin/audit',
      summary: 'Search the audit log',
      description:
        "total_count is exact up to 10,000 matching events; beyond that it is the database planner's estimate and the " +
        'response carries X-Total-Count-Estimated: true, except on the last page, whose total is exact. ' +
        '_links.next is present exactly when more events follow, whatever the estimate. A user_search matching more ' +
        'than 1,000 usernames or email addresses is searched whole, but slower: a longer text or user_id is faster.',
      tags: TAG,
      auth: { permission: 'audit:read' },
      query: adminAuditQuery,
      responses: pageResponses,
    },
    async (ctx, { query: { page, limit, ...filter } }) => {
      await answerPage(ctx, filter, { page, limit });
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/admin/audit/reports',
      summary: 'Reports of suspicious events',
      tags: TAG,
      auth: { permission: 'audit:read' },
      query: z.object({ status: oneOf(AUDIT_REPORT_STATUSES).optional() }),
      responses: { 200: { description: 'Bare array of reports, newest first', schema: z.array(auditReportSchema) } },
    },
    async (ctx, { query }) => {
      const q = AuditReport.query(ctx.services.db);
      if (query.status) q.where('status', query.status);
      ctx.body = (await reportRows(ctx.services.db, q)).map(presentAuditReport);
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/admin/audit/reports/:report_id',
      summary: 'Review a report',
      description: 'Sets reviewed_by and reviewed_at and mails the reporting user the new status.',
      tags: TAG,
      auth: { permission: 'audit:write' },
      params: z.object({ report_id: zUuid() }),
      body: z.object({
        status: oneOf(AUDIT_REPORT_STATUSES).optional(),
        resolution_notes: zChars({ trim: true, max: 4000 }).nullish(),
      }),
      responses: {
        200: { description: 'The report', schema: auditReportSchema },
        404: { description: 'No such report' },
      },
    },
    async (ctx, { params, body }) => {
      const report = await reviewAuditReport(ctx.services, params.report_id, body, requestAttribution(ctx));
      ctx.body = presentAuditReport(report);
    },
  );
}
