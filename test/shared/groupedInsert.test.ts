import test from 'ava';
import { insertGrouped } from '../../shared/groupedInsert';
import { Device } from '../../shared/models/Device';
import { Trip } from '../../shared/models/Trip';
import { useStack } from '../helpers/stack';

const stack = useStack(test);
const MISSING = '00000000-0000-4000-8000-000000000000';

/** The INSERT statements into `table` the stack's knex sends while `work` runs. */
async function insertsInto(table: string, work: () => Promise<unknown>): Promise<number> {
  const { db } = stack();
  let n = 0;
  const count = (q: { sql: string }) => {
    if (q.sql.startsWith(`insert into "${table}"`)) n++;
  };
  db.on('query', count);
  try {
    await work();
  } finally {
    db.off('query', count);
  }
  return n;
}

test.serial('rows submitted in one turn share one INSERT; each gets its own row with its own columns', async (t) => {
  const { db } = stack();
  let rows: Device[] = [];
  const inserts = await insertsInto('devices', async () => {
    rows = await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        insertGrouped(
          Device,
          db,
          i % 2 ? { name: `grouped-${i}`, device_type: `type-${i}` } : { name: `grouped-${i}` },
        ),
      ),
    );
  });
  t.is(inserts, 1);
  t.is(new Set(rows.map((r) => r.id)).size, 25);
  for (const [i, row] of rows.entries()) {
    t.true(row instanceof Device);
    t.is(row.name, `grouped-${i}`);
    // A column one row leaves out takes its default, whatever the other rows set.
    t.is(row.device_type, i % 2 ? `type-${i}` : null);
    const stored = await db('devices').where('id', row.id).first();
    t.is(stored.name, row.name);
    t.is(stored.device_type, row.device_type);
    t.is(new Date(stored.created_at).getTime(), row.created_at.getTime());
  }
});

test.serial("one row's constraint error fails that row alone, with the error it has alone", async (t) => {
  const { db } = stack();
  const results = await Promise.allSettled(
    Array.from({ length: 6 }, (_, i) =>
      insertGrouped(Trip, db, {
        name: `isolated-${i}`,
        status: 'draft',
        gps_logging_enabled: false,
        ...(i === 3 ? { category_id: MISSING } : {}),
      }),
    ),
  );
  for (const [i, r] of results.entries()) {
    if (i === 3) {
      t.is(r.status, 'rejected');
      t.regex(String((r as PromiseRejectedResult).reason), /foreign key/);
    } else {
      t.is(r.status, 'fulfilled');
      t.is((r as PromiseFulfilledResult<Trip>).value.name, `isolated-${i}`);
    }
  }
  const stored = (await db('trips').where('name', 'like', 'isolated-%').orderBy('name').pluck('name')) as string[];
  t.deepEqual(stored, ['isolated-0', 'isolated-1', 'isolated-2', 'isolated-4', 'isolated-5']);
});

test.serial('an id given by the caller is kept; a duplicate fails alone as a unique violation', async (t) => {
  const { db } = stack();
  const first = await insertGrouped(Device, db, { name: 'own-id' });
  const [again, other] = await Promise.allSettled([
    insertGrouped(Device, db, { id: first.id, name: 'same id' }),
    insertGrouped(Device, db, { name: 'beside a duplicate' }),
  ]);
  t.is(again.status, 'rejected');
  t.regex(String((again as PromiseRejectedResult).reason), /duplicate key|unique/i);
  t.is(other.status, 'fulfilled');
  t.is((await db('devices').where('id', first.id).first()).name, 'own-id');
});
