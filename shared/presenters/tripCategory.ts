import type { TripCategory } from '../models/TripCategory';

/** Trip category (spec §2). */
export function presentTripCategory(c: TripCategory) {
  return {
    id: c.id,
    parent_id: c.parent_id,
    name: c.name,
    description: c.description,
    color: c.color,
    is_active: c.is_active,
    sort_order: c.sort_order,
    created_at: c.created_at.toISOString(),
    updated_at: c.updated_at.toISOString(),
  };
}
