import test from 'ava';
import type { Knex } from 'knex';
import knexFactory from 'knex';
import { createTestDatabase } from '../helpers/db';

/**
 * Every foreign key's column(s) lead some btree index of the referencing table. PostgreSQL indexes
 * only the referenced key: without an index on the referencing side, deleting a parent row (or
 * changing its key) scans the whole child table for its children, inside the deleting transaction
 * (migrations/20261206000000_foreign_key_indexes.ts). A migration that adds a foreign key adds its
 * index too, or this test names it.
 *
 * An index counts when its first key columns are the foreign key's columns (in any order), it is
 * valid, and it is whole or partial on `col IS NOT NULL` for one of them: the foreign key's own
 * lookup (`col = $1`) implies that predicate, any other one it does not.
 */
let db: Knex;
let drop: () => Promise<void>;

test.before(async () => {
  const d = await createTestDatabase();
  drop = d.drop;
  db = knexFactory({ client: 'pg', connection: d.url, pool: { min: 0, max: 2 } });
});
test.after.always(async () => {
  await db?.destroy();
  await drop?.();
});

const UNINDEXED_FOREIGN_KEYS = `
  SELECT c.conrelid::regclass::text AS "table", c.conname AS "constraint",
         (SELECT array_agg(a.attname::text ORDER BY k.ord)
            FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum) AS columns,
         c.confrelid::regclass::text AS "references"
    FROM pg_constraint c
    JOIN pg_namespace n ON n.oid = c.connamespace
   WHERE c.contype = 'f' AND n.nspname = current_schema()
     AND NOT EXISTS (
       SELECT 1
         FROM pg_index i
         JOIN pg_class ic ON ic.oid = i.indexrelid
         JOIN pg_am am ON am.oid = ic.relam
        WHERE i.indrelid = c.conrelid
          AND i.indisvalid
          AND am.amname = 'btree'
          AND cardinality(c.conkey) <= i.indnkeyatts
          -- indkey is an int2vector (0-based): its text form as a 1-based array.
          AND (string_to_array(i.indkey::text, ' ')::int2[])[1:cardinality(c.conkey)] @> c.conkey
          AND (i.indpred IS NULL OR pg_get_expr(i.indpred, i.indrelid) IN (
                SELECT '(' || quote_ident(a.attname) || ' IS NOT NULL)'
                  FROM pg_attribute a
                 WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey))))
   ORDER BY 1, 2`;

interface Unindexed {
  table: string;
  constraint: string;
  columns: string[];
  references: string;
}

async function unindexedForeignKeys(conn: Knex | Knex.Transaction): Promise<Unindexed[]> {
  return (await conn.raw<{ rows: Unindexed[] }>(UNINDEXED_FOREIGN_KEYS)).rows;
}

test('every foreign key of the migrated schema leads an index', async (t) => {
  const missing = await unindexedForeignKeys(db);
  t.deepEqual(
    missing.map((m) => `${m.table}(${m.columns.join(', ')}) -> ${m.references} [${m.constraint}]`),
    [],
    'add an index led by these columns (partial on `col IS NOT NULL` for a nullable one) in a migration',
  );
  // The query looked at the schema: it has foreign keys, and sees indexes that lead with them.
  const { rows } = await db.raw<{ rows: Array<{ n: number }> }>(
    `SELECT count(*)::int AS n FROM pg_constraint WHERE contype = 'f' AND connamespace = current_schema()::regnamespace`,
  );
  t.true(rows[0].n > 40, `${rows[0].n} foreign keys`);
});

test('the check tells indexed foreign keys from unindexed ones', async (t) => {
  // In a transaction that is rolled back: the tables never reach the schema.
  const trx = await db.transaction();
  try {
    await trx.raw('CREATE TABLE fk_check_parent (id int PRIMARY KEY, a int, b int, UNIQUE (a, b))');
    await trx.raw(
      `CREATE TABLE fk_check_child (
         id int PRIMARY KEY,
         plain int REFERENCES fk_check_parent, -- no index
         whole int REFERENCES fk_check_parent, -- a whole index
         not_null int REFERENCES fk_check_parent, -- partial on its own IS NOT NULL
         other_partial int REFERENCES fk_check_parent, -- partial on something else
         second int REFERENCES fk_check_parent, -- second column of an index
         a int, b int,
         FOREIGN KEY (a, b) REFERENCES fk_check_parent (a, b) -- led by (b, a, id): any order
       )`,
    );
    await trx.raw('CREATE INDEX ON fk_check_child (whole)');
    await trx.raw('CREATE INDEX ON fk_check_child (not_null) WHERE not_null IS NOT NULL');
    await trx.raw('CREATE INDEX ON fk_check_child (other_partial) WHERE id > 0');
    await trx.raw('CREATE INDEX ON fk_check_child (id, second)');
    await trx.raw('CREATE INDEX ON fk_check_child (b, a, id)');
    const found = (await unindexedForeignKeys(trx)).filter((m) => m.table === 'fk_check_child');
    t.deepEqual(found.map((m) => m.columns.join(',')).sort(), ['other_partial', 'plain', 'second']);
  } finally {
    await trx.rollback();
  }
});
