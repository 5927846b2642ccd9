import type { Setting } from '../models/Setting';
import { z } from '../zod';
import { iso } from './iso';

/** System setting (decisions.md): `{key, value, description, is_public, updated_at}`. */
export const settingSchema = z
  .object({
    key: z.string(),
    value: z.unknown().describe('Any JSON value'),
    description: z.string().nullable(),
    is_public: z.boolean(),
    updated_at: z.string().describe('ISO 8601'),
  })
  .openapi('Setting');

/** A setting as the API shows it. */
export function presentSetting(s: Setting): z.infer<typeof settingSchema> {
  return {
    key: s.key,
    value: s.value,
    description: s.description,
    is_public: s.is_public,
    updated_at: iso(s.updated_at),
  };
}
