import test from 'ava';
import type { Knex } from 'knex';
import { freshEmail, passwordResetToken, useAccountsStack } from '../helpers/accounts';
import { createUser, TestUser } from '../helpers/factories';
import { tokenOf } from '../helpers/mailbox';
import { lockWaiters } from '../helpers/wait';

/*
 * A session is created under the user's row lock, which bans, deletions and password resets take
 * too (completeLogin, createInternalSession, resetPassword). Each test holds a row from a
 * connection of its own so that the requests queue in a chosen order, then lets them go: whatever
 * order they run in, no session may outlive the change that should have ended it.
 */
const { stack, mailbox } = useAccountsStack(test);

const PASSWORD = 'race-password-1';

/** A user who signs in with PASSWORD. */
const withPassword = (): Promise<TestUser> => createUser(stack().db, { password: PASSWORD });

/** Holds `sql`'s row lock in a transaction of its own until `release()`. */
async function hold(db: Knex, sql: string, bindings: string[]) {
  const trx = await db.transaction();
  await trx.raw(sql, bindings);
  return { release: () => trx.commit() };
}

const signIn = (email: string) => stack().request('POST', '/v1/auth/login', { body: { email, password: PASSWORD } });

/** Whether a session token still works. */
const works = async (token: string | undefined) =>
  token !== undefined && (await stack().request('GET', '/v1/users/me', { token })).status === 200;

test.serial('a sign-in under way when the password is reset keeps no session', async (t) => {
  const s = stack();
  const u = await withPassword();
  const token = await passwordResetToken(s.db, u);
  const lock = await hold(s.db, 'SELECT 1 FROM users WHERE id = ? FOR UPDATE', [u.id]);
  // The sign-in checks the password, then waits at the session; the reset commits meanwhile.
  const login = signIn(u.email);
  await lockWaiters(s.db, 1);
  const reset = s.request('POST', '/v1/auth/reset-password/confirm', { body: { token, password: 'race-new-2' } });
  await lockWaiters(s.db, 2);
  await lock.release();
  const [l, r] = await Promise.all([login, reset]);
  t.is(r.status, 200, r.text);
  t.true([200, 401].includes(l.status), l.text);
  t.false(await works(l.body.session?.sessionToken), 'the old password left a working session');
});

test.serial('a sign-in under way when the account is banned keeps no session, also after the unban', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const u = await withPassword();
  const lock = await hold(s.db, 'SELECT 1 FROM users WHERE id = ? FOR UPDATE', [u.id]);
  // The ban queues first, the sign-in's session behind it.
  const ban = s.request('POST', `/v1/users/${u.id}/ban`, { token: admin.token, body: { reason: 'race' } });
  await lockWaiters(s.db, 1);
  const login = signIn(u.email);
  await lockWaiters(s.db, 2);
  await lock.release();
  const [b, l] = await Promise.all([ban, login]);
  t.is(b.status, 201, b.text);
  t.true([200, 403].includes(l.status), l.text);
  t.is((await s.request('DELETE', `/v1/users/${u.id}/ban`, { token: admin.token })).status, 200);
  t.false(await works(l.body.session?.sessionToken), 'a session made during the ban works after the unban');
});

test.serial('POST /v1/sessions: 403 for a banned user; none outlives a deletion under way', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const banned = await createUser(s.db);
  t.is(
    (await s.request('POST', `/v1/users/${banned.id}/ban`, { token: admin.token, body: { reason: 'x' } })).status,
    201,
  );
  const expires = new Date(Date.now() + 3_600_000).toISOString();
  const refused = await s.request('POST', '/v1/sessions', { token: s.systemKey, body: { userId: banned.id, expires } });
  t.is(refused.status, 403, refused.text);
  t.regex(refused.body.message, /banned/);
  t.is(
    await s
      .db('sessions')
      .where('user_id', banned.id)
      .count({ n: '*' })
      .first()
      .then((r) => Number(r!.n)),
    0,
  );

  const u = await createUser(s.db);
  const lock = await hold(s.db, 'SELECT 1 FROM users WHERE id = ? FOR UPDATE', [u.id]);
  const del = s.request('DELETE', `/v1/users/${u.id}`, { token: admin.token });
  await lockWaiters(s.db, 1);
  const session = s.request('POST', '/v1/sessions', { token: s.systemKey, body: { userId: u.id, expires } });
  await lockWaiters(s.db, 2);
  await lock.release();
  const [d, c] = await Promise.all([del, session]);
  t.is(d.status, 204, d.text);
  t.true([201, 400].includes(c.status), c.text);
  t.is((await s.request('POST', `/v1/admin/users/${u.id}/cancel-deletion`, { token: admin.token })).status, 200);
  t.false(await works(c.body.data?.sessionToken), 'a session made during the deletion works after the restore');
});

test.serial('a reset link for the old address is dead once an address change committed first', async (t) => {
  const s = stack();
  const u = await withPassword();
  const signedIn = await signIn(u.email);
  t.is(signedIn.status, 200, signedIn.text);
  const resetToken = await passwordResetToken(s.db, u);
  const next = freshEmail('race-moved');
  const asked = await s.request('POST', `/v1/users/${u.id}/email/request-change`, {
    token: signedIn.body.session.sessionToken,
    body: { email: next },
  });
  t.is(asked.status, 200, asked.text);
  const changeToken = tokenOf(await mailbox().waitFor(next));
  // The address change takes its locks and waits at the account's row; the reset comes after it.
  const account = await s.db('platform_accounts').where({ user_id: u.id }).first('id');
  const lock = await hold(s.db, 'SELECT 1 FROM platform_accounts WHERE id = ? FOR UPDATE', [account.id]);
  const change = s.request('POST', '/v1/users/email/verify', {
    token: signedIn.body.session.sessionToken,
    body: { token: changeToken },
  });
  await lockWaiters(s.db, 1);
  const reset = s.request('POST', '/v1/auth/reset-password/confirm', {
    body: { token: resetToken, password: 'old-mailbox-pwned-1' },
  });
  await lockWaiters(s.db, 2);
  await lock.release();
  const [c, r] = await Promise.all([change, reset]);
  t.is(c.status, 200, c.text);
  t.is(r.status, 400, r.text);
  t.is(
    (await s.request('POST', '/v1/auth/login', { body: { email: next, password: 'old-mailbox-pwned-1' } })).status,
    401,
  );
});

test.serial('cancelling a pending address change that is being applied does not say it was cancelled', async (t) => {
  const s = stack();
  const u = await withPassword();
  const session = (await signIn(u.email)).body.session.sessionToken as string;
  const next = freshEmail('race-cancel');
  const asked = await s.request('POST', `/v1/users/${u.id}/email/request-change`, {
    token: session,
    body: { email: next },
  });
  t.is(asked.status, 200, asked.text);
  const changeToken = tokenOf(await mailbox().waitFor(next));
  // The change claims its token while the cancel deletes the open ones: both wait at the token.
  const lock = await hold(
    s.db,
    "SELECT 1 FROM account_tokens WHERE user_id = ? AND purpose = 'email_change' FOR UPDATE",
    [u.id],
  );
  const change = s.request('POST', '/v1/users/email/verify', { token: session, body: { token: changeToken } });
  await lockWaiters(s.db, 1);
  const cancel = s.request('DELETE', `/v1/users/${u.id}/email/pending`, { token: session });
  await lockWaiters(s.db, 2);
  await lock.release();
  const [c, x] = await Promise.all([change, cancel]);
  const changed = (await s.db('platform_accounts').where({ user_id: u.id }).first('email')).email === next;
  t.is(c.status === 200, changed, c.text);
  // "Cancelled" only when the change did not happen.
  t.false(x.status === 200 && changed, `${c.status} ${c.text} | ${x.status} ${x.text}`);
});
