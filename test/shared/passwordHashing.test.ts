import test from 'ava';
import { randomBytes } from 'node:crypto';
import { DEFAULT_PASSWORD_HASHING } from '../../shared/config';
import { configurePasswordHashing, hashPassword, verifyPassword } from '../../shared/domain/passwords';
import { startStack } from '../helpers/stack';

/** The cost [m, t, p] an argon2id hash string carries: `$argon2id$v=19$m=…,p=…,t=…$salt$hash`. */
function costOf(hash: string): number[] {
  const params = Object.fromEntries(
    hash
      .split('$')[3]
      .split(',')
      .map((kv) => kv.split('=')),
  );
  return [params.m, params.t, params.p].map(Number);
}

// Serial: the cost is process-wide, and the stacks below set it as they start.
test.serial('the configured cost is what new hashes carry; hashes of another cost still verify', async (t) => {
  configurePasswordHashing(DEFAULT_PASSWORD_HASHING);
  const strong = await hashPassword('first password');
  t.deepEqual(costOf(strong), [65536, 3, 4]);
  configurePasswordHashing({ memoryCost: 2048, timeCost: 2, parallelism: 2 });
  const cheap = await hashPassword('second password');
  t.deepEqual(costOf(cheap), [2048, 2, 2]);
  t.true(await verifyPassword(strong, 'first password'));
  t.false(await verifyPassword(strong, 'second password'));
  t.true(await verifyPassword(cheap, 'second password'));
  // An account without a hash is still refused (after a verification against a throw-away hash).
  t.false(await verifyPassword(null, 'second password'));
});

test.serial('a process hashes at the cost its configuration names (PASSWORD_HASH_*)', async (t) => {
  for (const [env, cost] of [
    [{ PASSWORD_HASH_MEMORY_KIB: '4096', PASSWORD_HASH_TIME_COST: '2', PASSWORD_HASH_PARALLELISM: '1' }, [4096, 2, 1]],
    [{ PASSWORD_HASH_MEMORY_KIB: '1024', PASSWORD_HASH_TIME_COST: '1', PASSWORD_HASH_PARALLELISM: '1' }, [1024, 1, 1]],
  ] as const) {
    const s = await startStack({ env });
    try {
      const email = `hash_${randomBytes(4).toString('hex')}@example.test`;
      const r = await s.request('POST', '/v1/auth/register', { body: { email, password: 'correct horse battery' } });
      t.is(r.status, 202, r.text);
      // The hash waits in the registration's token until the link is used.
      const pending = await s.db('account_tokens').where({ email, purpose: 'registration' }).first('payload');
      t.deepEqual(costOf(pending.payload.password_hash), [...cost]);
    } finally {
      await s.close();
    }
  }
});
