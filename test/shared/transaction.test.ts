import test from 'ava';
import { transaction } from '../../shared/db';
import { Device } from '../../shared/models/Device';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

const names = async (prefix: string) =>
  (await stack().db('devices').where('name', 'like', `${prefix}%`).orderBy('name').pluck('name')) as string[];

test.serial(
  'a transaction commits what the query builder, objection and raw SQL wrote, and nothing before',
  async (t) => {
    const { db } = stack();
    const result = await transaction(db, async (trx) => {
      await trx('devices').insert({ name: 'commit-a' });
      await Device.query(trx).insert({ name: 'commit-b' });
      await trx.raw('INSERT INTO devices (name) VALUES (?)', ['commit-c']);
      // Visible inside, not outside, until the commit.
      t.deepEqual((await trx('devices').where('name', 'like', 'commit-%').orderBy('name').pluck('name')) as string[], [
        'commit-a',
        'commit-b',
        'commit-c',
      ]);
      t.deepEqual(await names('commit-'), []);
      return 42;
    });
    t.is(result, 42);
    t.deepEqual(await names('commit-'), ['commit-a', 'commit-b', 'commit-c']);
  },
);

test.serial('a throw rolls back every write and rethrows the error; the pool stays usable', async (t) => {
  const { db } = stack();
  const boom = new Error('boom');
  const err = await t.throwsAsync(
    transaction(db, async (trx) => {
      await trx('devices').insert({ name: 'rollback-a' });
      await Device.query(trx).insert({ name: 'rollback-b' });
      throw boom;
    }),
  );
  t.is(err, boom);
  // A failed statement aborts the transaction; its error comes out as it is.
  await t.throwsAsync(
    transaction(db, async (trx) => {
      await trx('devices').insert({ name: 'rollback-c' });
      await trx.raw('SELECT * FROM no_such_table');
    }),
    { message: /no_such_table/ },
  );
  t.deepEqual(await names('rollback-'), []);
  // Every connection went back clean: more transactions than the pool has connections, at once.
  const n = 3 * (db.client.pool?.max ?? 10);
  await Promise.all(
    Array.from({ length: n }, (_, i) =>
      transaction(db, async (trx) => {
        await trx('devices').insert({ name: `rollback-after-${String(i).padStart(3, '0')}` });
      }),
    ),
  );
  t.is((await names('rollback-after-')).length, n);
});

test.serial('concurrent transactions do not see each other’s writes before they commit', async (t) => {
  const { db } = stack();
  let release!: () => void;
  const hold = new Promise<void>((r) => (release = r));
  let written!: () => void;
  const wrote = new Promise<void>((r) => (written = r));
  const first = transaction(db, async (trx) => {
    await trx('devices').insert({ name: 'iso-first' });
    written();
    await hold;
  });
  await wrote;
  await transaction(db, async (trx) => {
    t.is(await trx('devices').where('name', 'iso-first').first(), undefined);
  });
  release();
  await first;
  t.deepEqual(await names('iso-'), ['iso-first']);
});

test.serial('a transactor refuses queries once its transaction has ended', async (t) => {
  const { db } = stack();
  let kept: any;
  await transaction(db, async (trx) => {
    kept = trx;
  });
  t.true(kept.isCompleted());
  await t.throwsAsync(kept('devices').insert({ name: 'late-write' }), { message: /already complete/ });
  await t.throwsAsync(Device.query(kept).insert({ name: 'late-write' }), { message: /already complete/ });
  t.deepEqual(await names('late-'), []);
});

test.serial('a nested transaction is a savepoint: its failure undoes only its own writes', async (t) => {
  const { db } = stack();
  await transaction(db, async (trx) => {
    await trx('devices').insert({ name: 'sp-outer' });
    await t.throwsAsync(
      trx.transaction(async (inner) => {
        await inner('devices').insert({ name: 'sp-inner-failed' });
        throw new Error('inner');
      }),
      { message: 'inner' },
    );
    await trx.transaction(async (inner) => {
      await inner('devices').insert({ name: 'sp-inner-kept' });
    });
  });
  t.deepEqual(await names('sp-'), ['sp-inner-kept', 'sp-outer']);
});
