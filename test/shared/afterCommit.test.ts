import test from 'ava';
import { afterCommit, transaction } from '../../shared/db';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test.serial('after-commit hooks run in order once the transaction commits, and are awaited', async (t) => {
  const { db } = stack();
  const seen: string[] = [];
  const result = await transaction(db, async (trx) => {
    afterCommit(trx, async () => {
      const row = await db('system_config').where('key', 'after_commit_probe').first();
      seen.push(row ? 'committed-visible' : 'not-visible');
    });
    afterCommit(trx, () => void seen.push('second'));
    await trx('system_config').insert({ key: 'after_commit_probe', value: JSON.stringify(1) });
    t.deepEqual(seen, [], 'nothing runs before the commit');
    return 'done';
  });
  t.is(result, 'done');
  t.deepEqual(seen, ['committed-visible', 'second']);
});

test.serial('a rollback drops the hooks; a savepoint registers on the outer transaction', async (t) => {
  const { db } = stack();
  const seen: string[] = [];
  await t.throwsAsync(
    transaction(db, async (trx) => {
      afterCommit(trx, () => void seen.push('rolled back'));
      throw new Error('boom');
    }),
    { message: 'boom' },
  );
  t.deepEqual(seen, []);
  await transaction(db, async (trx) => {
    await trx.transaction(async (inner) => afterCommit(inner, () => void seen.push('from savepoint')));
  });
  t.deepEqual(seen, ['from savepoint']);
});

test.serial('a failing hook does not stop the next one or the committed result', async (t) => {
  const { db } = stack();
  const seen: string[] = [];
  const r = await transaction(db, async (trx) => {
    afterCommit(trx, () => {
      throw new Error('publish failed');
    });
    afterCommit(trx, () => void seen.push('ran'));
    return 1;
  });
  t.is(r, 1);
  t.deepEqual(seen, ['ran']);
  t.throws(() => afterCommit(db as never, () => undefined), { message: /afterCommit needs a transaction/ });
});
