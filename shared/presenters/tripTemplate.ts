import type { TripTemplate } from '../models/TripTemplate';
import { z } from '../zod';
import { iso } from './iso';

/** Trip template (spec §2): the values a trip created from it starts with. */
export const tripTemplateSchema = z
  .object({
    id: z.string().uuid(),
    name: z.string(),
    description: z.string().nullable(),
    category_id: z.string().uuid().nullable(),
    origin_id: z.string().uuid().nullable(),
    destination_id: z.string().uuid().nullable(),
    device_id: z.string().uuid().nullable(),
    gps_logging_enabled: z.boolean(),
    default_weight_kg: z.number().nullable(),
    notes: z.string().nullable(),
    tags: z.array(z.string()),
    created_at: z.string().describe('ISO 8601'),
    updated_at: z.string().describe('ISO 8601'),
  })
  .openapi('TripTemplate');

/** A trip template as the API shows it. */
export function presentTripTemplate(t: TripTemplate): z.infer<typeof tripTemplateSchema> {
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
    created_at: iso(t.created_at),
    updated_at: iso(t.updated_at),
  };
}
