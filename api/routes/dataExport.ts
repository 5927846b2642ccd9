import Router from '@koa/router';
import { deliverDataExport } from '../../shared/commands/dataExports';
import { ACCOUNT_SCOPES, authorizeSelf } from '../../shared/policies';
import { exportLogPageSchema, presentExportLog } from '../../shared/presenters/dataExport';
import { exportLogPage } from '../../shared/queries/dataExport';
import { z, zQueryInteger } from '../../shared/zod';
import { AppState, defineRoute, requestAttribution } from '../routing';
import type { ApiServices } from '../services';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['data-export'];

/** An integer query value clamped into [min, max] (spec §4.22: out-of-range limits are clamped, not refused). */
const clampedInt = (def: number, min: number, max: number) =>
  zQueryInteger()
    .default(def)
    .transform((n) => Math.min(max, Math.max(min, n)));

const logsQuery = z.object({
  limit: clampedInt(50, 1, 100),
  offset: zQueryInteger((n) => n.min(0, 'must be 0 or more')).default(0),
});

/** `service-data-export-YYYY-MM-DD.zip`, dated by when the archive was made (UTC). */
const archiveName = (d: Date) => `service-data-export-${d.toISOString().slice(0, 10)}.zip`;

/** Personal data export (spec §4.22): the ZIP download and the log of past exports. */
export function dataExportRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/user/export',
      summary: 'Download my data export (ZIP: data.json, report.pdf, README.txt)',
      description:
        'Builds the archive in a worker and answers with it once done. Parallel requests of one user share one ' +
        'export. 429 with Retry-After beyond EXPORT_RATE_LIMIT_PER_HOUR; 503 when the export takes longer than ' +
        'EXPORT_TIMEOUT_MS; 500 when it fails. HEAD answers the headers of a download without building one: it ' +
        'neither counts against the hourly limit nor appears in the export log.',
      tags: TAG,
      auth: { account: ACCOUNT_SCOPES.export },
      responses: {
        200: {
          description: 'The archive',
          schema: z.string().openapi({ format: 'binary' }),
          contentType: 'application/zip',
        },
        429: { description: 'Too many exports this hour (Retry-After)' },
        500: { description: 'The export could not be generated' },
        503: { description: 'The export did not finish in time' },
      },
    },
    async (ctx) => {
      const userId = authorizeSelf(ctx.state.principal);
      // HEAD (a link checker, a prefetch) is safe: the headers a download would have, and no export
      // run, counted, logged or audited for it.
      const head = ctx.method === 'HEAD';
      const done = head ? undefined : await deliverDataExport(ctx.services, userId, requestAttribution(ctx));
      ctx.set('Content-Type', 'application/zip');
      ctx.set('Content-Disposition', `attachment; filename="${archiveName(done?.exportedAt ?? new Date())}"`);
      ctx.set('Cache-Control', 'no-store');
      if (done) ctx.body = done.zip;
      else ctx.status = 200;
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/user/export/logs',
      summary: 'My past data exports',
      tags: TAG,
      auth: { account: ACCOUNT_SCOPES.export },
      query: logsQuery,
      responses: { 200: { description: '{logs, total, hasMore}', schema: exportLogPageSchema } },
    },
    async (ctx, { query }) => {
      const userId = authorizeSelf(ctx.state.principal);
      const { logs, total } = await exportLogPage(ctx.services.db, userId, query.limit, query.offset);
      ctx.body = { logs: logs.map(presentExportLog), total, hasMore: query.offset + logs.length < total };
    },
  );
}
