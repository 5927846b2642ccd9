import test, { type ExecutionContext } from 'ava';
import { createSession } from '../../shared/commands/sessions';
import { freshEmail, sentOutboxRow, useAccountsStack } from '../helpers/accounts';
import { tokenOf } from '../helpers/mailbox';

/**
 * What is left of an account's secrets and personal data: a used one-time token keeps no password
 * hash (nor the rest of its payload).
 */
const { stack, mailbox } = useAccountsStack(test);

const PASSWORD = 'correct horse battery';

/** register → mailed link → register/verify; returns the new user's id. */
async function registerAndVerify(t: ExecutionContext, email: string, username: string): Promise<string> {
  const s = stack();
  const r = await s.request('POST', '/v1/auth/register', { body: { email, password: PASSWORD, username } });
  t.is(r.status, 202, r.text);
  const token = tokenOf(await mailbox().waitFor(email));
  const v = await s.request('POST', '/v1/auth/register/verify', { body: { token } });
  t.is(v.status, 201, v.text);
  t.is(v.body.data.username, username);
  await sentOutboxRow(s.db, email, 'registration');
  return v.body.data.id as string;
}

const uniqueName = (tag: string) => `${tag}_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;

test('a used registration token keeps no password hash and no username', async (t) => {
  const s = stack();
  const email = freshEmail('used-reg');
  const username = uniqueName('usedreg');
  const userId = await registerAndVerify(t, email, username);
  const hash = (await s.db('platform_accounts').where('user_id', userId).first('password_hash')).password_hash;
  t.regex(hash, /^\$argon2id\$/);
  const rows = await s.db('account_tokens').where({ purpose: 'registration', email });
  t.is(rows.length, 1);
  t.truthy(rows[0].used_at);
  t.is(rows[0].payload.password_hash, undefined);
  t.false(JSON.stringify(rows[0]).includes(hash));
  t.false(JSON.stringify(rows[0]).includes(username));
});

test('a used email-link token keeps no password hash', async (t) => {
  const s = stack();
  const signUp = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: {
      email: freshEmail('prov'),
      name: 'Prov Link',
      oauthProvider: 'github',
      oauthProviderId: `gh-purge-${Date.now()}-${Math.random()}`,
    },
  });
  t.is(signUp.status, 200, signUp.text);
  const userId = signUp.body.data.id as string;
  const { token } = await createSession(s.db, userId, new Date(Date.now() + 3600_000), { platformSlug: 'github' });
  const email = freshEmail('link');
  const asked = await s.request('POST', `/v1/users/${userId}/email-link/request`, {
    token,
    body: { email, password: PASSWORD },
  });
  t.is(asked.status, 200, asked.text);
  const link = tokenOf(await mailbox().waitFor(email));
  const verified = await s.request('POST', '/v1/users/email-link/verify', { token, body: { token: link } });
  t.is(verified.status, 200, verified.text);
  const hash = (await s.db('platform_accounts').where({ user_id: userId, email }).first('password_hash')).password_hash;
  t.regex(hash, /^\$argon2id\$/);
  const row = await s.db('account_tokens').where({ purpose: 'email_link', user_id: userId }).first();
  t.truthy(row.used_at);
  t.is(row.payload.password_hash, undefined);
  t.false(JSON.stringify(row).includes(hash));
});
