import type { AuditEvent } from '../models/AuditEvent';
import { iso } from './iso';

/** Audit event (spec §2), every listed field and nothing else. */
export function presentAuditEvent(e: AuditEvent) {
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
