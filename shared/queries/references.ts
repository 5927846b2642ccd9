import type { Knex } from 'knex';
import { badRequest } from '../errors';

/** Foreign-key fields of the tracking bodies and the table each one points into. */
const REFERENCE_TABLES = {
  category_id: ['trip_categories', 'trip category'],
  parent_id: ['trip_categories', 'trip category'],
  origin_id: ['locations', 'location'],
  destination_id: ['locations', 'location'],
  device_id: ['devices', 'device'],
  api_key_id: ['api_keys', 'API key'],
  trip_id: ['trips', 'trip'],
} as const;

export type ReferenceField = keyof typeof REFERENCE_TABLES;

/**
 * Checks in one query that every given id exists; the first missing one is a 400 naming the field
 * (`origin_id: no such location`) instead of a foreign-key failure at insert time. Null and
 * undefined values are skipped (clearing a reference is always allowed).
 */
export async function assertReferencesExist(
  db: Knex,
  refs: Partial<Record<ReferenceField, string | null | undefined>> | object,
): Promise<void> {
  // Accepts a whole request body: only the reference fields in it are checked.
  const entries = (Object.entries(refs) as Array<[ReferenceField, unknown]>).filter(
    (e): e is [ReferenceField, string] => Object.hasOwn(REFERENCE_TABLES, e[0]) && typeof e[1] === 'string',
  );
  if (entries.length === 0) return;
  const sql = entries
    .map(([field]) => `SELECT ?::text AS field FROM ${REFERENCE_TABLES[field][0]} WHERE id = ?::uuid`)
    .join(' UNION ALL ');
  const { rows } = await db.raw<{ rows: Array<{ field: string }> }>(
    sql,
    entries.flatMap(([field, id]) => [field, id]),
  );
  const found = new Set(rows.map((r) => r.field));
  const missing = entries.find(([field]) => !found.has(field));
  if (missing) throw badRequest(`${missing[0]}: no such ${REFERENCE_TABLES[missing[0]][1]}`);
}

/** The subset of these trip ids that exist (one query). */
export async function existingTripIds(db: Knex, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db('trips').whereIn('id', ids).select('id');
  return new Set(rows.map((r) => r.id as string));
}
