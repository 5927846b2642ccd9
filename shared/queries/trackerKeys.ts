import type { Knex } from 'knex';

/** The API keys linked to the given devices (whose tracker links a change must drop). */
export async function trackerKeysOfDevices(db: Knex, deviceIds: Array<string | null | undefined>): Promise<string[]> {
  const ids = [...new Set(deviceIds.filter((d): d is string => typeof d === 'string'))];
  if (ids.length === 0) return [];
  const rows = await db('devices').whereIn('id', ids).whereNotNull('api_key_id').select('api_key_id');
  return rows.map((r) => r.api_key_id as string);
}
