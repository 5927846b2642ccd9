import type { TripCategory } from '../models/TripCategory';
import { z } from '../zod';
import { iso } from './iso';

/** Trip category (spec §2): a node of the category hierarchy. */
export const tripCategorySchema = z
  .object({
    id: z.string().uuid(),
    parent_id: z.string().uuid().nullable(),
    name: z.string(),
    description: z.string().nullable(),
    color: z.string().nullable(),
    is_active: z.boolean(),
    sort_order: z.number().int(),
    created_at: z.string().describe('ISO 8601'),
    updated_at: z.string().describe('ISO 8601'),
  })
  .openapi('TripCategory');

/** A trip category as the API shows it. */
export function presentTripCategory(c: TripCategory): z.infer<typeof tripCategorySchema> {
  return {
    id: c.id,
    parent_id: c.parent_id,
    name: c.name,
    description: c.description,
    color: c.color,
    is_active: c.is_active,
    sort_order: c.sort_order,
    created_at: iso(c.created_at),
    updated_at: iso(c.updated_at),
  };
}
