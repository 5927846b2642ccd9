import test from 'ava';
import { tokenOf } from '../helpers/mailbox';
import { freshEmail, useAccountsStack } from '../helpers/accounts';

/**
 * A request answered 503 because the database failed it gives back what it counted in Redis
 * (a mail slot, the per-user mail count, a sign-in attempt), so the retry the client is told to
 * make is not refused for something that never happened. The failure is made by a trigger raising
 * SQLSTATE 57P03 ("cannot connect now", as while PostgreSQL starts), or a table briefly renamed.
 * Serial: the triggers and the rename act on the whole database.
 */
const { stack, mailbox } = useAccountsStack(test);

async function registered(password: string): Promise<{ email: string; id: string; token: string }> {
  const s = stack();
  const email = freshEmail('fw');
  await s.request('POST', '/v1/auth/register', { body: { email, password } });
  const v = await s.request('POST', '/v1/auth/register/verify', {
    body: { token: tokenOf(await mailbox().waitFor(email)) },
  });
  const login = await s.request('POST', '/v1/auth/login', { body: { email, password } });
  return { email, id: v.body.data.id, token: login.body.session.sessionToken };
}

/** Inserts into `table` fail while `run` runs (when `when` holds for the new row). */
async function failingInserts<T>(table: string, when: string, run: () => Promise<T>): Promise<T> {
  const db = stack().db;
  await db.raw(`CREATE OR REPLACE FUNCTION test_fail_write() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'the database is starting up' USING ERRCODE = '57P03'; END $$`);
  await db.raw(
    `CREATE TRIGGER test_fail_write BEFORE INSERT ON ${table} FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION test_fail_write()`,
  );
  try {
    return await run();
  } finally {
    await db.raw(`DROP TRIGGER test_fail_write ON ${table}`);
  }
}

test.serial('an email change answered 503 is not counted: the retry is sent, not refused with 429', async (t) => {
  const s = stack();
  const user = await registered('change-password');
  const to = freshEmail('fwnew');
  const ask = () =>
    s.request('POST', `/v1/users/${user.id}/email/request-change`, { token: user.token, body: { email: to } });
  const refused = await failingInserts('account_tokens', "NEW.purpose = 'email_change'", ask);
  t.is(refused.status, 503, refused.text);
  const retry = await ask();
  t.true(retry.status < 300, `${retry.status} ${retry.text}`);
  t.truthy(await mailbox().waitFor(to));
});

test.serial('a verification mail that could not be written at sign-in is written by the next attempt', async (t) => {
  const s = stack();
  const email = freshEmail('fwverify');
  await s.request('POST', '/v1/auth/register', { body: { email, password: 'verify-password' } });
  // Registered but not verified: its sign-in answers 403 and mails a new verification link.
  await s.request('POST', '/v1/auth/register/verify', { body: { token: tokenOf(await mailbox().waitFor(email)) } });
  await s
    .db('platform_accounts')
    .whereRaw('lower(email) = ?', [email.toLowerCase()])
    .update({ email_verified_at: null });
  const login = () => s.request('POST', '/v1/auth/login', { body: { email, password: 'verify-password' } });
  const refused = await failingInserts('email_outbox', "NEW.template = 'email_verification'", login);
  t.is(refused.status, 503, refused.text);
  const retry = await login();
  t.is(retry.status, 403, retry.text);
  t.truthy(
    await s.db('email_outbox').where({ to_address: email.toLowerCase(), template: 'email_verification' }).first(),
  );
});

test.serial('sign-ins that failed on the database count no attempt: the right password then signs in', async (t) => {
  const s = stack();
  const user = await registered('throttle-password');
  const login = () =>
    s.request('POST', '/v1/auth/login', { body: { email: user.email, password: 'throttle-password' } });
  // The account lookup fails as it would with the database gone.
  await s.db.raw('ALTER TABLE platform_accounts RENAME TO platform_accounts_away');
  try {
    for (let i = 0; i < 7; i++) t.true((await login()).status >= 500);
  } finally {
    await s.db.raw('ALTER TABLE platform_accounts_away RENAME TO platform_accounts');
  }
  const ok = await login();
  t.is(ok.status, 200, ok.text);
});
