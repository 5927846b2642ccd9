import { Model, QueryBuilder } from 'objection';

/** The builder methods the overrides below use (objection's own generics say nothing more here). */
interface Chain {
  insert(rows: unknown): Chain;
  patch(patch: unknown): Chain;
  findById(id: unknown): Chain;
  returning(columns: string): Chain;
}

/**
 * objection's query builder with its "…AndFetch" writes made one statement: on PostgreSQL,
 * `insertAndFetch`, `patchAndFetchById` and `$query().patchAndFetch` write and read the row back
 * with `RETURNING *` instead of a second SELECT by id. Same answer (a new model of the stored row,
 * every column, JSON attributes parsed; undefined when patchAndFetchById finds no row), one round
 * trip fewer for every create and update. The types stay objection's.
 */
export class ReturningQueryBuilder<M extends Model, R = M[]> extends QueryBuilder<M, R> {}

Object.assign(ReturningQueryBuilder.prototype, {
  insertAndFetch(this: Chain, rows: unknown) {
    return this.insert(rows).returning('*');
  },
  patchAndFetchById(this: Chain, id: unknown, patch: unknown) {
    return this.findById(id).patch(patch).returning('*');
  },
  /** `instance.$query().patchAndFetch(patch)`: the instance query already selects its row. */
  patchAndFetch(this: Chain, patch: unknown) {
    return this.patch(patch).returning('*');
  },
});

/** Base of every model: objection's Model with the one-statement writes above. */
export class AppModel extends Model {
  static override QueryBuilder = ReturningQueryBuilder as unknown as typeof QueryBuilder;
}
