import type { Device } from '../models/Device';

/** Device (spec §2), with the id of the linked tracker API key (never the key itself). */
export function presentDevice(d: Device) {
  return {
    id: d.id,
    name: d.name,
    description: d.description,
    device_type: d.device_type,
    is_active: d.is_active,
    api_key_id: d.api_key_id,
    created_at: d.created_at.toISOString(),
    updated_at: d.updated_at.toISOString(),
  };
}
