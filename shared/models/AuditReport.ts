import { AppModel } from './AppModel';

export const AUDIT_REPORT_REASONS = ['not_me', 'suspicious', 'unknown_device', 'unknown_location', 'other'] as const;
export const AUDIT_REPORT_STATUSES = ['pending', 'reviewed', 'resolved', 'dismissed'] as const;
export type AuditReportStatus = (typeof AUDIT_REPORT_STATUSES)[number];

/** A user's report of one of their own audit events (spec §2 Audit report). */
export class AuditReport extends AppModel {
  static override tableName = 'audit_reports';
  id!: string;
  audit_event_id!: string;
  user_id!: string;
  reason!: (typeof AUDIT_REPORT_REASONS)[number];
  description!: string | null;
  status!: AuditReportStatus;
  reviewed_by!: string | null;
  reviewed_at!: Date | null;
  resolution_notes!: string | null;
  created_at!: Date;
  updated_at!: Date;
}
