import { randomUUID } from 'node:crypto';
import { UnrecoverableError } from 'bullmq';
import { storeExportArchive } from '../../shared/caches/dataExports';
import { presentDataExport } from '../../shared/presenters/dataExport';
import { loadDataExportRows } from '../../shared/queries/dataExport';
import { zipExport } from '../export/archive';
import { readmeText, reportHtml } from '../export/documents';
import { exportLocale } from '../export/i18n';
import { sharedPdfRenderer } from '../export/pdfRenderer';
import type { Processor } from './types';

/**
 * Builds one user's data export: data.json from the database, report.pdf printed by the process's
 * Chromium, README.txt, zipped and parked in Redis for the waiting request(s). A failed attempt
 * (a crashed browser) is retried by BullMQ with a fresh browser.
 */
export const dataExportProcessor: Processor<'dataExport'> = async (job, ctx) => {
  const started = Date.now();
  const exportedAt = new Date();
  const rows = await loadDataExportRows(ctx.db, job.data.userId);
  const loaded = Date.now();
  if (!rows) throw new UnrecoverableError('user not found');
  const locale = exportLocale(rows.user.preferred_locale, ctx.config.supportedLocales);
  const data = presentDataExport(rows, exportedAt);
  const renderer = sharedPdfRenderer({
    executablePath: ctx.config.chromiumPath,
    maxPages: ctx.config.dataExport.pdfMaxPages,
    logger: ctx.logger,
  });
  const pdf = await renderer.render(reportHtml(data, locale));
  const rendered = Date.now();
  const zip = await zipExport(
    {
      'data.json': JSON.stringify(data, null, 2),
      'report.pdf': pdf,
      'README.txt': readmeText(data, locale),
    },
    exportedAt,
  );
  const archiveId = randomUUID();
  await storeExportArchive(ctx.redis, ctx.config, archiveId, zip);
  ctx.logger.info(
    {
      jobId: job.id,
      userId: job.data.userId,
      bytes: zip.length,
      ms: Date.now() - started,
      loadMs: loaded - started,
      pdfMs: rendered - loaded,
      attempt: job.attemptsMade + 1,
    },
    'data export built',
  );
  return { archiveId, fileSizeBytes: zip.length, locale, exportedAt: exportedAt.toISOString() };
};
