import { attributed, Attribution, recordAuditEvent } from '../audit';
import {
  countExportRequest,
  giveBackExportRequest,
  joinExportWait,
  leaveExportWait,
  readExportArchive,
} from '../caches/dataExports';
import type { ServiceContext } from '../context';
import { transaction } from '../db';
import { HttpError, serviceUnavailable, tooManyRequests } from '../errors';
import { ExportLog } from '../models/ExportLog';
import { QueueName, type DataExportResult } from '../queues';
import { insertRow } from '../models/AppModel';

/** A finished export as the request hands it out. */
export interface DeliveredExport {
  zip: Buffer;
  exportedAt: Date;
  log: ExportLog;
}

const EXPORT_FORMAT = 'zip';

/** Records a failed export (audit only: no archive reached the user). Never throws. */
async function auditFailure(ctx: ServiceContext, userId: string, by: Attribution, reason: string): Promise<void> {
  await recordAuditEvent(
    attributed(by, {
      user_id: userId,
      event_type: 'data_exported',
      resource_type: 'user',
      resource_id: userId,
      status: 'failure',
      error_message: reason,
      metadata: { format: EXPORT_FORMAT },
    }),
    ctx.db,
  ).catch((err) => ctx.logger.error({ err, userId }, 'audit of a failed data export not written'));
}

/**
 * GET /v1/user/export: counts the request against the user's hourly limit (429 beyond it; a failed
 * export gives its count back, a timed-out one does not: its job runs on), then
 * enqueues the export job and waits for it. A user's parallel requests share one job (BullMQ
 * deduplication by user), and each receives the archive. On success writes the export log entry
 * and the data_exported audit event in one transaction; a failed job is a logged, audited 500, a
 * job not done within EXPORT_TIMEOUT_MS an audited 503, and so is one still running when the api's
 * drain nears its deadline (ServiceContext.endWaits).
 */
export async function deliverDataExport(
  ctx: ServiceContext,
  userId: string,
  by: Attribution,
): Promise<DeliveredExport> {
  const allowance = await countExportRequest(ctx.redis, ctx.config, userId);
  if (!allowance.allowed)
    throw tooManyRequests(
      `at most ${allowance.limit} data exports per hour; try again in ${allowance.retryAfterSeconds} s`,
      allowance.limit,
      allowance.retryAfterSeconds,
    );

  try {
    await joinExportWait(ctx.redis, ctx.config, userId);
  } catch {
    await giveBackExportRequest(ctx.redis, allowance);
    throw serviceUnavailable('the export queue is unavailable; try again shortly');
  }
  let archiveId: string | null = null;
  // Whether the request's count is given back: only when the export ended without an archive and
  // with no work left running (a timed-out job runs on, and a retry joins it while it does).
  let giveBack = false;
  try {
    let result: DataExportResult;
    try {
      result = await ctx.queues.enqueueAndWait<'dataExport', DataExportResult>(
        QueueName.dataExport,
        { userId, requestedAt: new Date().toISOString() },
        ctx.config.dataExport.timeoutMs,
        { deduplication: { id: userId } },
      );
    } catch (err) {
      const e = err as Error;
      if (e.name === 'TimeoutError') {
        // Also when the api's drain ended the wait before its deadline (the message says so).
        ctx.logger.warn(
          { userId, timeoutMs: ctx.config.dataExport.timeoutMs, reason: e.message },
          'data export timed out',
        );
        await auditFailure(ctx, userId, by, 'timed out');
        throw serviceUnavailable('the data export did not finish in time; try again shortly');
      }
      giveBack = true;
      ctx.logger.error({ userId, err: e.message }, 'data export failed');
      // The user reads this event: the reason, not the worker's error text (paths, hosts), which
      // only the log above keeps.
      await auditFailure(ctx, userId, by, 'generation failed');
      throw new HttpError(500, 'InternalServerError', 'the data export could not be generated');
    }
    archiveId = result.archiveId;
    const zip = await readExportArchive(ctx.redis, ctx.config, archiveId);
    if (!zip) {
      giveBack = true;
      ctx.logger.error({ userId, archiveId }, 'data export archive missing');
      await auditFailure(ctx, userId, by, 'archive missing');
      throw new HttpError(500, 'InternalServerError', 'the data export could not be generated');
    }
    const exportedAt = new Date(result.exportedAt);
    const log = await transaction(ctx.db, async (trx) => {
      const row = await insertRow(ExportLog, trx, {
        user_id: userId,
        exported_at: exportedAt,
        ip_address: by.ipAddress ?? null,
        user_agent: by.userAgent ?? null,
        export_format: EXPORT_FORMAT,
        file_size_bytes: zip.length,
        locale: result.locale,
      });
      await recordAuditEvent(
        attributed(by, {
          user_id: userId,
          event_type: 'data_exported',
          resource_type: 'user',
          resource_id: userId,
          metadata: {
            export_log_id: row.id,
            format: EXPORT_FORMAT,
            file_size_bytes: zip.length,
            locale: result.locale,
          },
        }),
        trx,
      );
      return row;
    });
    return { zip, exportedAt, log };
  } finally {
    await leaveExportWait(ctx.redis, ctx.config, userId, archiveId);
    // The hourly limit counts exports received, and bounds the work a user starts: a failed one
    // gives its count back, a timed-out one (its job still running) does not.
    if (giveBack) await giveBackExportRequest(ctx.redis, allowance);
  }
}
