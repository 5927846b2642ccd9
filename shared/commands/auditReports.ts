import type { Attribution } from '../audit';
import type { ServiceContext } from '../context';
import { afterCommit, transaction } from '../db';
import { emailLocale } from '../emails/accountEmails';
import { writeAuditReportMail } from '../emails/auditReportEmail';
import { conflict, notFound } from '../errors';
import { AuditEvent } from '../models/AuditEvent';
import { AUDIT_REPORT_REASONS, AuditReport, AuditReportStatus } from '../models/AuditReport';
import { isUuid } from '../zod';
import { insertRow, patchLoaded } from '../models/AppModel';

export interface AuditReportInput {
  reason: (typeof AUDIT_REPORT_REASONS)[number];
  description?: string | null;
}

export interface AuditReportReview {
  status?: AuditReportStatus;
  resolution_notes?: string | null;
}

/** Whether an event with a report in this status counts as reported: every status but dismissed. */
const reportedWhile = (status: AuditReportStatus) => status !== 'dismissed';

const isUniqueViolation = (err: unknown) => (err as { code?: string }).code === '23505';

/**
 * A user reports one of their own audit events (spec §4.24): 404 for an event that is not theirs
 * (indistinguishable from a missing one), 409 when it is already reported. The event's is_reported
 * is set in the same transaction.
 */
export async function createAuditReport(
  ctx: ServiceContext,
  userId: string,
  eventId: string,
  input: AuditReportInput,
): Promise<AuditReport> {
  if (!isUuid(eventId)) throw notFound('audit event');
  try {
    return await transaction(ctx.db, async (trx) => {
      const event = await AuditEvent.query(trx)
        .where({ id: eventId.toLowerCase(), user_id: userId })
        .forUpdate()
        .first();
      if (!event) throw notFound('audit event');
      if (await AuditReport.query(trx).where('audit_event_id', event.id).first())
        throw conflict('this event is already reported');
      const report = await insertRow(AuditReport, trx, {
        audit_event_id: event.id,
        user_id: userId,
        reason: input.reason,
        description: input.description ?? null,
        status: 'pending',
      });
      await AuditEvent.query(trx).patch({ is_reported: true }).where('id', event.id);
      return report;
    });
  } catch (err) {
    // Two reports of one event at once: the unique index keeps one, the other is the same 409.
    if (isUniqueViolation(err)) throw conflict('this event is already reported');
    throw err;
  }
}

/** The reporting user's address for the status mail: the email sign-in first, then verified, primary, older ones. */
async function reporterAddress(ctx: ServiceContext, userId: string) {
  const row = await ctx
    .db('platform_accounts as pa')
    .join('platforms as p', 'p.id', 'pa.platform_id')
    .join('users as u', 'u.id', 'pa.user_id')
    .where('pa.user_id', userId)
    .whereNotNull('pa.email')
    .orderByRaw(
      "(p.slug = 'email') desc, (pa.email_verified_at is not null) desc, pa.is_primary desc, pa.created_at asc",
    )
    .first<{ email: string; preferred_locale: string | null } | undefined>('pa.email', 'u.preferred_locale');
  return row;
}

/**
 * An administrator reviews a report (PATCH /v1/admin/audit/reports/{id}): status and notes change
 * when given, reviewed_by/reviewed_at are set, the event's is_reported follows the status (false
 * once dismissed), and the reporting user is mailed through the email outbox iff this commits and
 * the status or the notes changed.
 */
export async function reviewAuditReport(
  ctx: ServiceContext,
  reportId: string,
  review: AuditReportReview,
  by: Attribution,
): Promise<AuditReport> {
  const address = await AuditReport.query(ctx.db)
    .findById(reportId)
    .then((r) => (r ? reporterAddress(ctx, r.user_id) : undefined));
  return transaction(ctx.db, async (trx) => {
    const report = await AuditReport.query(trx).findById(reportId).forUpdate();
    if (!report) throw notFound('audit report');
    const status = review.status ?? report.status;
    const now = new Date();
    const updated = await patchLoaded(
      report,
      trx,
      {
        status,
        ...(review.resolution_notes !== undefined ? { resolution_notes: review.resolution_notes } : {}),
        reviewed_by: by.actorId,
        reviewed_at: now,
        updated_at: now,
      },
      'audit report',
    );
    const event = await AuditEvent.query(trx)
      .patchAndFetchById(report.audit_event_id, { is_reported: reportedWhile(status) })
      .select('event_type', 'created_at');
    // A review that changes neither the status nor the notes tells the reporter nothing new: a
    // repeated PATCH (a retry, a double click) does not mail them again.
    const changed =
      status !== report.status || (updated.resolution_notes ?? null) !== (report.resolution_notes ?? null);
    if (address && changed) {
      await writeAuditReportMail(
        trx,
        { address: address.email, userId: report.user_id, locale: emailLocale(address.preferred_locale) },
        {
          status,
          eventType: event.event_type,
          eventAt: new Date(event.created_at),
          notes: updated.resolution_notes,
        },
      );
      afterCommit(trx, () => ctx.outbox.wake());
    } else if (changed) {
      ctx.logger.info({ reportId: report.id }, 'audit report reviewed; the reporting user has no email address');
    }
    return updated;
  });
}
