import type { Knex } from 'knex';
import { Model, PartialModelObject, QueryBuilder, QueryContext } from 'objection';
import { notFound } from '../errors';

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

/** A value the fast write below sends as a binding: anything but a query-builder or raw SQL value. */
function isPlainValue(v: unknown): boolean {
  if (v === null || typeof v !== 'object' || v instanceof Date || Buffer.isBuffer(v)) return true;
  if (Array.isArray(v)) return v.every(isPlainValue);
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

/** A statement compiled once for a table and column set, and the columns in its bindings' order. */
interface Shape {
  sql: string;
  order: string[];
}

/** Compiled statements by kind, table and column set. */
const shapes = new Map<string, Shape>();
/** Statement shapes kept; past this many (column sets are few in practice) a new one is compiled per call. */
const MAX_SHAPES = 4000;
/** The id's placeholder binding while an update is compiled (no column is named so). */
const ID_BINDING = '\u0000id';

/**
 * The statement of `kind` for these columns, compiled by knex with each column's own name as its
 * value, so knex's bindings say in which order the values go (it sorts an insert's columns).
 */
function shapeOf(db: Knex, kind: 'insert' | 'update', model: typeof AppModel, columns: string[]): Shape {
  const key = `${kind}\n${model.tableName}\n${columns.join(',')}`;
  let shape = shapes.get(key);
  if (shape) return shape;
  const named = Object.fromEntries(columns.map((c) => [c, c]));
  const compiled =
    kind === 'insert'
      ? db(model.tableName).insert(named).returning('*').toSQL()
      : db(model.tableName)
          .where(model.idColumn as string, ID_BINDING)
          .update(named)
          .returning('*')
          .toSQL();
  const order = compiled.bindings.filter((b) => b !== ID_BINDING) as string[];
  if (order.length !== columns.length || (kind === 'update' && compiled.bindings.at(-1) !== ID_BINDING))
    throw new Error(`${kind} of ${model.tableName}: unexpected bindings ${JSON.stringify(compiled.bindings)}`);
  shape = { sql: compiled.sql, order };
  if (shapes.size < MAX_SHAPES) shapes.set(key, shape);
  return shape;
}

/** The columns a model instance writes: what `$toDatabaseJson` gives, undefined left out, sorted (one shape per set). */
function written(row: Record<string, unknown>): string[] {
  return Object.keys(row)
    .filter((c) => row[c] !== undefined)
    .sort();
}

/**
 * `Model.query(db).patchAndFetchById(id, patch)` without the query builder: the same row written
 * and returned (the model's `$beforeUpdate` runs, JSON attributes are formatted and parsed as
 * objection does, undefined fields are left out), but the statement's text is compiled once per
 * table and column list and sent as `UPDATE … RETURNING *` with its bindings. objection's builder
 * (its operations, hooks and a knex compile on every call) cost more of a PATCH's CPU than the
 * round trip; this is the write fast path every update by id takes (README "Hot paths").
 * Undefined when no row has that id, and typed so: objection types patchAndFetchById as the model,
 * and callers that took a row loaded before the write for granted answered a 500 when a concurrent
 * DELETE removed it in between (found by the race34 audit). A write to a row the caller found
 * goes through `patchFound` or `patchLoaded` (a 404). A patch holding raw SQL or a subquery goes
 * through objection.
 */
export async function patchById<M extends AppModel>(
  model: typeof AppModel & (new () => M),
  db: Knex,
  id: string | number,
  patch: PartialModelObject<M>,
): Promise<M | undefined> {
  const values = patch as Record<string, unknown>;
  if (!Object.values(values).every(isPlainValue)) {
    const query = model.query(db) as unknown as {
      patchAndFetchById(id: unknown, patch: unknown): PromiseLike<unknown>;
    };
    return (await query.patchAndFetchById(id, patch)) as M | undefined;
  }
  const instance = model.fromJson(values, { patch: true, skipValidation: true }) as M;
  await instance.$beforeUpdate({ patch: true }, {} as QueryContext);
  const row = instance.$toDatabaseJson() as Record<string, unknown>;
  const columns = written(row);
  if (columns.length === 0) throw new Error(`patchById(${model.tableName}): nothing to write`);
  const { sql, order } = shapeOf(db, 'update', model, columns);
  const bindings = [...order.map((c) => row[c]), id] as Knex.RawBinding[];
  const { rows } = await db.raw<{ rows: object[] }>(sql, bindings);
  return rows.length ? (model.fromDatabaseJson(rows[0]) as M) : undefined;
}

/**
 * `patchById` of a row the caller found before (a route's findOr404, a read in the command): a
 * 404 naming `what` when it was deleted meanwhile, as if the request had come after the delete.
 */
export async function patchFound<M extends AppModel>(
  model: typeof AppModel & (new () => M),
  db: Knex,
  id: string | number,
  patch: PartialModelObject<M>,
  what: string,
): Promise<M> {
  const updated = await patchById(model, db, id, patch);
  if (!updated) throw notFound(what);
  return updated;
}

/**
 * `Model.query(db).insertAndFetch(row)` without the query builder, as `patchById` is for updates:
 * the model's `$beforeInsert` runs, JSON attributes are formatted and parsed, undefined fields take
 * their DEFAULT, and the `INSERT … RETURNING *` text is compiled once per table and column list.
 * A row holding raw SQL or a subquery goes through objection.
 */
export async function insertRow<M extends AppModel>(
  model: typeof AppModel & (new () => M),
  db: Knex,
  input: PartialModelObject<M>,
): Promise<M> {
  const values = input as Record<string, unknown>;
  if (!Object.values(values).every(isPlainValue)) {
    const query = model.query(db) as unknown as { insertAndFetch(row: unknown): PromiseLike<unknown> };
    return (await query.insertAndFetch(input)) as M;
  }
  const instance = model.fromJson(values, { skipValidation: true }) as M;
  await instance.$beforeInsert({} as QueryContext);
  const row = instance.$toDatabaseJson() as Record<string, unknown>;
  const columns = written(row);
  const { sql, order } = columns.length
    ? shapeOf(db, 'insert', model, columns)
    : { sql: db(model.tableName).insert({}).returning('*').toSQL().sql, order: [] };
  const { rows } = await db.raw<{ rows: object[] }>(sql, order.map((c) => row[c]) as Knex.RawBinding[]);
  return model.fromDatabaseJson(rows[0]) as M;
}

/**
 * `instance.$query(db).patchAndFetch(patch)` by `patchById`: the row the caller loaded, patched and
 * read back; a 404 naming `what` when it was deleted meanwhile.
 */
export async function patchLoaded<M extends AppModel>(
  instance: M,
  db: Knex,
  patch: PartialModelObject<M>,
  what: string,
): Promise<M> {
  const model = instance.constructor as typeof AppModel & (new () => M);
  return patchFound(model, db, instance.$id() as string | number, patch, what);
}

/**
 * `Model.query(db).deleteById(id)` without the query builder (no model defines delete hooks): the
 * number of rows deleted, by one prepared `DELETE … WHERE <id> = ?`.
 */
export async function deleteById(model: typeof AppModel, db: Knex, id: string | number): Promise<number> {
  const key = `delete\n${model.tableName}`;
  let shape = shapes.get(key);
  if (!shape) {
    shape = {
      sql: db(model.tableName)
        .where(model.idColumn as string, id)
        .delete()
        .toSQL().sql,
      order: [],
    };
    shapes.set(key, shape);
  }
  const result = await db.raw<{ rowCount: number | null }>(shape.sql, [id]);
  return result.rowCount ?? 0;
}
