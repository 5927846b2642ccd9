import { AUDIT_REPORT_REASONS, AUDIT_REPORT_STATUSES, AuditReport } from '../models/AuditReport';
import { z } from '../zod';
import { iso } from './iso';

/** Audit report (spec §2), every listed field and nothing else. */
export const auditReportSchema = z.object({
  id: z.string().uuid(),
  audit_event_id: z.string().uuid(),
  user_id: z.string().uuid(),
  reason: z.enum(AUDIT_REPORT_REASONS),
  description: z.string().nullable(),
  status: z.enum(AUDIT_REPORT_STATUSES),
  reviewed_by: z.string().nullable(),
  reviewed_at: z.string().nullable(),
  resolution_notes: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});

export function presentAuditReport(r: AuditReport): z.infer<typeof auditReportSchema> {
  return {
    id: r.id,
    audit_event_id: r.audit_event_id,
    user_id: r.user_id,
    reason: r.reason,
    description: r.description,
    status: r.status,
    reviewed_by: r.reviewed_by,
    reviewed_at: r.reviewed_at ? iso(r.reviewed_at) : null,
    resolution_notes: r.resolution_notes,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

/** POST /v1/users/me/audit/{event_id}/report answers {success, report, error}. */
export const auditReportCreatedSchema = z.object({
  success: z.literal(true),
  report: auditReportSchema,
  error: z.null(),
});
