import type { Knex } from 'knex';
import { transaction } from '../db';
import { badRequest, notFound } from '../errors';
import { TripCategory } from '../models/TripCategory';
import { assertReferencesExist } from '../queries/references';
import { deleteById, insertRow, patchLoaded } from '../models/AppModel';

export interface TripCategoryInput {
  parent_id?: string | null;
  name?: string;
  description?: string | null;
  color?: string | null;
  is_active?: boolean;
  sort_order?: number;
}

/** Is `candidateParent` the category itself or one of its descendants? (walks up from the candidate) */
async function wouldCycle(trx: Knex, id: string, candidateParent: string): Promise<boolean> {
  if (id === candidateParent) return true;
  const { rows } = await trx.raw(
    `WITH RECURSIVE up AS (
       SELECT id, parent_id FROM trip_categories WHERE id = ?
       UNION
       SELECT c.id, c.parent_id FROM trip_categories c JOIN up ON c.id = up.parent_id
     ) SELECT 1 FROM up WHERE id = ? LIMIT 1`,
    [candidateParent, id],
  );
  return rows.length > 0;
}

/**
 * Creates (id null) or patches a trip category. A parent must exist and may not be the category
 * itself or one of its descendants (400 naming parent_id). Hierarchy changes are serialised with a
 * transaction-scoped advisory lock, so two concurrent moves cannot build a cycle together.
 */
export async function saveTripCategory(db: Knex, id: string | null, input: TripCategoryInput): Promise<TripCategory> {
  return transaction(db, async (trx) => {
    if (input.parent_id) {
      await trx.raw('SELECT pg_advisory_xact_lock(hashtext(?))', ['trip_categories.hierarchy']);
      await assertReferencesExist(trx, { parent_id: input.parent_id });
    }
    const before = id ? await TripCategory.query(trx).findById(id).forUpdate() : undefined;
    if (id && !before) throw notFound('trip category');
    if (id && input.parent_id && (await wouldCycle(trx, id, input.parent_id))) {
      throw badRequest('parent_id: a category cannot be placed under itself or one of its descendants');
    }
    const fields = Object.fromEntries(
      Object.entries(input).filter(([, v]) => v !== undefined),
    ) as Partial<TripCategory>;
    return before ? patchLoaded(before, trx, fields, 'trip category') : insertRow(TripCategory, trx, fields);
  });
}

/** Deletes a trip category; its children move to the top level by the foreign key (404 when there is none). */
export async function deleteTripCategory(db: Knex, id: string): Promise<void> {
  const n = await deleteById(TripCategory, db, id);
  if (!n) throw notFound('trip category');
}
