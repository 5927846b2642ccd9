import type { Knex } from 'knex';
import { notFound } from '../errors';
import { TripTemplate } from '../models/TripTemplate';
import { insertGrouped } from '../groupedInsert';
import { deleteById, patchLoaded } from '../models/AppModel';

/** Fields of POST/PATCH /v1/trip-templates. */
export interface TripTemplateInput {
  name?: string;
  description?: string | null;
  category_id?: string | null;
  origin_id?: string | null;
  destination_id?: string | null;
  device_id?: string | null;
  gps_logging_enabled?: boolean;
  default_weight_kg?: number | null;
  notes?: string | null;
  tags?: string[];
}

/**
 * Creates a trip template in one statement, shared with concurrent creates (insertGrouped). Unknown
 * references are a 400 naming the field: the foreign keys check them (shared/errors.ts).
 */
export async function createTripTemplate(db: Knex, input: TripTemplateInput & { name: string }): Promise<TripTemplate> {
  return insertGrouped(TripTemplate, db, input);
}

/**
 * Patches a template the caller loaded; only provided fields change (an empty body changes nothing).
 * Unknown references are a 400 naming the field, as on create.
 */
export async function updateTripTemplate(
  db: Knex,
  template: TripTemplate,
  input: TripTemplateInput,
): Promise<TripTemplate> {
  const changed = Object.values(input).some((v) => v !== undefined);
  return changed ? patchLoaded(template, db, input, 'trip template') : template;
}

/** Deletes a trip template (404 when there is none). */
export async function deleteTripTemplate(db: Knex, id: string): Promise<void> {
  const n = await deleteById(TripTemplate, db, id);
  if (!n) throw notFound('trip template');
}
