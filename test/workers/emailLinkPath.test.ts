import test from 'ava';
import { createUser } from '../helpers/factories';
import { freshEmail } from '../helpers/accounts';
import { Mailbox, startMailbox, tokenOf } from '../helpers/mailbox';
import { startStack, Stack } from '../helpers/stack';

// A web app served under a sub-path: the mail links keep that path.
let box: Mailbox;
let s: Stack;

test.before(async () => {
  box = await startMailbox();
  s = await startStack({
    workers: true,
    env: { SMTP_URL: box.url, APP_URL: 'https://app.example.test/web', RATE_LIMIT_ANONYMOUS: '100000' },
  });
});

test.after.always(async () => {
  await s?.close();
  await box?.close();
});

test('with a path in APP_URL, the registration link is APP_URL + path + ?token= and its token works', async (t) => {
  const email = freshEmail('subpath');
  const r = await s.request('POST', '/v1/auth/register', { body: { email, password: 'correct horse battery' } });
  t.is(r.status, 202, r.text);
  const mail = await box.waitFor(email);
  t.regex(mail.text, /^https:\/\/app\.example\.test\/web\/auth\/register\/verify\?token=[A-Za-z0-9_-]{43}$/m);
  t.true(mail.html.includes('href="https://app.example.test/web/auth/register/verify?token='));
  const v = await s.request('POST', '/v1/auth/register/verify', { body: { token: tokenOf(mail) } });
  t.is(v.status, 201, v.text);
});

test('with a path in APP_URL, the password reset link keeps the path too', async (t) => {
  const user = await createUser(s.db);
  const r = await s.request('POST', '/v1/auth/reset-password/request', { body: { email: user.email } });
  t.is(r.status, 202, r.text);
  const mail = await box.waitFor(user.email);
  t.regex(mail.text, /^https:\/\/app\.example\.test\/web\/auth\/reset-password\?token=[A-Za-z0-9_-]{43}$/m);
});
