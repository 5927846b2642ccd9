import type { TripTemplate } from '../models/TripTemplate';

/** Trip template (spec §2). */
export function presentTripTemplate(t: TripTemplate) {
  return {
    id: t.id,
    name: t.name,
    description: t.description,
    category_id: t.category_id,
    origin_id: t.origin_id,
    destination_id: t.destination_id,
    device_id: t.device_id,
    gps_logging_enabled: t.gps_logging_enabled,
    default_weight_kg: t.default_weight_kg,
    notes: t.notes,
    tags: t.tags ?? [],
    created_at: t.created_at.toISOString(),
    updated_at: t.updated_at.toISOString(),
  };
}
