import test from 'ava';
import { hashPassword } from '../../shared/domain/passwords';
import { createUser } from '../helpers/factories';
import { statementsOn } from '../helpers/statements';
import { useStack } from '../helpers/stack';

/** docs/settings.md "Declared keys": auth.session_days, the lifetime of a session created by login. */
const stack = useStack(test, { env: { RATE_LIMIT_ANONYMOUS: '100000' } });
const DAY = 86_400_000;

test.serial('a login session lives auth.session_days: 30 by default, and what an admin sets', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const user = await createUser(s.db);
  await s
    .db('platform_accounts')
    .where({ user_id: user.id })
    .update({ password_hash: await hashPassword('session days pw') });
  /** Signs in; returns how long the new session lives, from the answer and from its row, in days. */
  const login = async () => {
    const before = Date.now();
    const r = await s.request('POST', '/v1/auth/login', { body: { email: user.email, password: 'session days pw' } });
    t.is(r.status, 200, r.text);
    const row = await s.db('sessions').where('user_id', user.id).orderBy('created_at', 'desc').first('expires_at');
    t.is(new Date(row.expires_at).toISOString(), r.body.session.expires);
    return (new Date(row.expires_at).getTime() - before) / DAY;
  };

  const byDefault = await login();
  t.true(byDefault >= 30 && byDefault < 30 + 1 / 24, String(byDefault));

  const patched = await s.request('PATCH', '/v1/system-config/auth.session_days', {
    token: admin.token,
    body: { value: 2 },
  });
  t.is(patched.status, 200, patched.text);
  const two = await login();
  t.true(two >= 2 && two < 2 + 1 / 24, String(two));
});

test.serial('a sign-in reads auth.session_days from the process cache, not from system_config', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { password: 'cached days pw' });
  const login = () => s.request('POST', '/v1/auth/login', { body: { email: user.email, password: 'cached days pw' } });
  t.is((await login()).status, 200);
  const { result, sql } = await statementsOn(s.db, 'system_config', login);
  t.is(result.status, 200, result.text);
  t.deepEqual(sql, [], 'a warm sign-in sends no statement on system_config');
});
