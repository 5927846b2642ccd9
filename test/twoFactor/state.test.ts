import test from 'ava';
import { twoFactorState } from '../../shared/queries/twoFactor';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('2FA state reads of one turn share one statement, each with its own row', async (t) => {
  const s = stack();
  const [on, off] = await Promise.all([createUser(s.db), createUser(s.db)]);
  await s.db('user_two_factor').insert({
    user_id: on.id,
    secret_encrypted: 'sealed-probe',
    enabled_at: new Date(),
  });
  const statements: string[] = [];
  const listener = (q: { sql: string }) => {
    if (/from "user_two_factor"/.test(q.sql)) statements.push(q.sql);
  };
  s.db.on('query', listener);
  try {
    const [a, b, c] = await Promise.all([
      twoFactorState(s.db, on.id),
      twoFactorState(s.db, off.id),
      twoFactorState(s.db, on.id.toUpperCase()),
    ]);
    t.is(statements.length, 1);
    t.is(a.row?.user_id, on.id);
    t.truthy(a.row?.enabled_at);
    t.is(b.row, undefined);
    t.is(c.row?.user_id, on.id);
    // With forUpdate (inside a transaction) it is the plain locking read.
    await s.db.transaction(async (trx) => {
      t.is((await twoFactorState(trx, on.id, { forUpdate: true })).row?.user_id, on.id);
    });
    t.true(statements.at(-1)!.includes('for update'));
  } finally {
    s.db.off('query', listener);
  }
});
