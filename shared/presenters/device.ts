import type { Device } from '../models/Device';
import { z } from '../zod';
import { iso } from './iso';

/** Device (spec §2), with the id of the linked tracker API key (never the key itself). */
export const deviceSchema = z
  .object({
    id: z.string().uuid(),
    name: z.string(),
    description: z.string().nullable(),
    device_type: z.string().nullable(),
    is_active: z.boolean(),
    api_key_id: z.string().uuid().nullable(),
    created_at: z.string().describe('ISO 8601'),
    updated_at: z.string().describe('ISO 8601'),
  })
  .openapi('Device');

/** A device as the API shows it. */
export function presentDevice(d: Device): z.infer<typeof deviceSchema> {
  return {
    id: d.id,
    name: d.name,
    description: d.description,
    device_type: d.device_type,
    is_active: d.is_active,
    api_key_id: d.api_key_id,
    created_at: iso(d.created_at),
    updated_at: iso(d.updated_at),
  };
}
