import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Model, PartialModelObject } from 'objection';
import { toHttpError } from './errors';
import { GroupCommit } from './groupCommit';

type ModelClass<M extends Model> = typeof Model & (new () => M);

const commits = new WeakMap<Knex, Map<ModelClass<Model>, GroupCommit<object, Model>>>();

/**
 * A new row of `model` (INSERT … RETURNING *), written with the other new rows of the same table
 * that requests submitted in the same turn: one multi-row INSERT and one commit for all of them
 * (GroupCommit), where each row alone would cost its own round trip. The table's id must be a uuid:
 * a row without one gets `randomUUID()` here, and the returned rows are matched to their requests
 * by it. Rows may set different columns (the others take their DEFAULT).
 *
 * A constraint or data error (a missing reference, a duplicate, a bad value) fails the batch, and
 * then every row is written alone, so only the faulty one fails, with the error it would have had
 * alone. The database unreachable fails every row with that error. Only for writes outside a
 * transaction, whose row is their only statement.
 */
export function insertGrouped<M extends Model>(model: ModelClass<M>, db: Knex, row: PartialModelObject<M>): Promise<M> {
  const idColumn = model.idColumn as string;
  let byModel = commits.get(db);
  if (!byModel) commits.set(db, (byModel = new Map()));
  let commit = byModel.get(model);
  if (!commit) {
    const insert = (rows: object[]) =>
      model
        .query(db)
        .insert(rows as Array<PartialModelObject<M>>)
        .returning('*') as unknown as Promise<M[]>;
    commit = new GroupCommit<object, Model>({
      flush: async (rows) => {
        const written = await insert(rows);
        const byId = new Map(written.map((m) => [String((m as unknown as Record<string, unknown>)[idColumn]), m]));
        return rows.map(
          (r) =>
            byId.get(String((r as Record<string, unknown>)[idColumn])) ??
            new Error(`grouped insert into ${model.tableName}: no row returned for an item`),
        );
      },
      flushOne: async (r) => (await insert([r]))[0],
      // A client error may be one row's fault; anything else (503 included) would fail each alone too.
      isolate: (err) => (toHttpError(err)?.status ?? 500) < 500,
    });
    byModel.set(model, commit);
  }
  const item = { ...(row as Record<string, unknown>) };
  if (item[idColumn] === undefined) item[idColumn] = randomUUID();
  return commit.submit(item) as Promise<M>;
}
