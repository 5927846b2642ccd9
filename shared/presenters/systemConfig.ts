import { z } from '../zod';
import { iso } from './iso';

/** A system_config row as read from the database. */
export interface SystemConfigRow {
  key: string;
  value: unknown;
  description: string | null;
  updated_at: Date;
}

/** System config entry (spec §2): key, value (any JSON), description, updated_at. */
export const systemConfigSchema = z
  .object({
    key: z.string().describe('Dotted key, e.g. gps.latest_cache_seconds'),
    value: z.unknown().describe('Any JSON value; its type is declared per key'),
    description: z.string().nullable(),
    updated_at: z.string().describe('ISO 8601'),
  })
  .openapi('SystemConfigEntry');

/** A system config entry as the API shows it. */
export function presentSystemConfig(r: SystemConfigRow): z.infer<typeof systemConfigSchema> {
  return { key: r.key, value: r.value, description: r.description, updated_at: iso(r.updated_at) };
}
