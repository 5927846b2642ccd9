import type { AuditEvent } from '../models/AuditEvent';
import { z } from '../zod';
import { iso } from './iso';

/** Audit event (spec §2), every listed field and nothing else. */
export const auditEventSchema = z.object({
  id: z.string().uuid(),
  user_id: z.string().nullable(),
  event_type: z.string(),
  resource_type: z.string().nullable(),
  resource_id: z.string().nullable(),
  actor_id: z.string().nullable(),
  ip_address: z.string().nullable(),
  user_agent: z.string().nullable(),
  description: z.string().nullable(),
  metadata: z.record(z.unknown()),
  status: z.enum(['success', 'failure']),
  error_message: z.string().nullable(),
  country_code: z.string().nullable(),
  country_name: z.string().nullable(),
  city: z.string().nullable(),
  region: z.string().nullable(),
  source_service: z.string(),
  created_at: z.string(),
  is_reported: z.boolean(),
});

export type AuditEventData = z.infer<typeof auditEventSchema>;

export function presentAuditEvent(e: AuditEvent): AuditEventData {
  return {
    id: e.id,
    user_id: e.user_id,
    event_type: e.event_type,
    resource_type: e.resource_type,
    resource_id: e.resource_id,
    actor_id: e.actor_id,
    ip_address: e.ip_address,
    user_agent: e.user_agent,
    description: e.description,
    metadata: e.metadata,
    status: e.status,
    error_message: e.error_message,
    country_code: e.country_code,
    country_name: e.country_name,
    city: e.city,
    region: e.region,
    source_service: e.source_service,
    created_at: iso(e.created_at),
    is_reported: e.is_reported,
  };
}

/** CreateAuditEventResponse (101) of a recorded event; failures are shared/proto/rpc failureReply. */
export const auditEventReceiptSchema = z.object({ success: z.literal(true), auditEventId: z.string() });

export function presentAuditEventReceipt(e: AuditEvent): z.infer<typeof auditEventReceiptSchema> {
  return { success: true, auditEventId: e.id };
}

/** Links of one page of a list (api/pagination.ts builds them from the request). */
const pageLinksSchema = z.object({
  self: z.string(),
  first: z.string(),
  last: z.string(),
  prev: z.string().optional(),
  next: z.string().optional(),
});

/** The audit lists of spec §4.24: {events, total_count, page, limit, total_pages, _links}. */
export const auditPageSchema = z.object({
  events: z.array(auditEventSchema),
  total_count: z.number().int(),
  page: z.number().int(),
  limit: z.number().int(),
  total_pages: z.number().int(),
  _links: pageLinksSchema,
});

export function presentAuditPage(
  events: AuditEvent[],
  total: number,
  page: { page: number; limit: number },
  links: z.infer<typeof pageLinksSchema>,
): z.infer<typeof auditPageSchema> {
  return {
    events: events.map(presentAuditEvent),
    total_count: total,
    page: page.page,
    limit: page.limit,
    total_pages: Math.max(1, Math.ceil(total / page.limit)),
    _links: links,
  };
}
