import test from 'ava';
import { ADDRESS_MAILS_PER_HOUR } from '../../shared/caches/mailSlots';
import { createUser } from '../helpers/factories';
import { tokenOf } from '../helpers/mailbox';
import { freshEmail, useAccountsStack } from '../helpers/accounts';

const { stack, mailbox } = useAccountsStack(test);

/** Registers and verifies an email/password user; returns its id and a session token. */
async function registered(tag: string, password = 'first-password-1') {
  const s = stack();
  const email = freshEmail(tag);
  await s.request('POST', '/v1/auth/register', { body: { email, password } });
  const v = await s.request('POST', '/v1/auth/register/verify', {
    body: { token: tokenOf(await mailbox().waitFor(email)) },
  });
  const login = await s.request('POST', '/v1/auth/login', { body: { email, password } });
  return { id: v.body.data.id as string, email, token: login.body.session.sessionToken as string };
}

test('a reset link mailed to the old address dies when the account moves to a new address', async (t) => {
  const s = stack();
  const u = await registered('mover');
  t.is((await s.request('POST', '/v1/auth/reset-password/request', { body: { email: u.email } })).status, 202);
  const reset = await mailbox().waitFor(u.email, (m) => m.subject === 'Reset your password');

  const next = freshEmail('moved');
  const req = await s.request('POST', `/v1/users/${u.id}/email/request-change`, {
    token: u.token,
    body: { email: next },
  });
  t.is(req.status, 200, req.text);
  const change = await mailbox().waitFor(next);
  t.is(
    (await s.request('POST', '/v1/users/email/verify', { token: u.token, body: { token: tokenOf(change) } })).status,
    200,
  );

  const pwned = await s.request('POST', '/v1/auth/reset-password/confirm', {
    body: { token: tokenOf(reset), password: 'old-mailbox-pwned-1' },
  });
  t.is(pwned.status, 400);
  t.is(pwned.body.message, 'invalid or expired token');
  t.is(
    (await s.request('POST', '/v1/auth/login', { body: { email: next, password: 'old-mailbox-pwned-1' } })).status,
    401,
  );
  t.is(
    (await s.request('POST', '/v1/auth/login', { body: { email: next, password: 'first-password-1' } })).status,
    200,
  );

  // A reset asked for the new address works as before.
  t.is((await s.request('POST', '/v1/auth/reset-password/request', { body: { email: next } })).status, 202);
  const fresh = await mailbox().waitFor(next, (m) => m.subject === 'Reset your password');
  const ok = await s.request('POST', '/v1/auth/reset-password/confirm', {
    body: { token: tokenOf(fresh), password: 'second-password-2' },
  });
  t.is(ok.status, 200, ok.text);
});

test("a deleted user's email-change token is an unusable token (400), not a 404 that tells the account is gone", async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const u = await registered('gone');
  const next = freshEmail('gone-next');
  t.is(
    (await s.request('POST', `/v1/users/${u.id}/email/request-change`, { token: admin.token, body: { email: next } }))
      .status,
    200,
  );
  const mail = await mailbox().waitFor(next);
  t.is((await s.request('DELETE', `/v1/users/${u.id}`, { token: admin.token })).status, 204);
  const r = await s.request('POST', '/v1/auth/verify-email', { body: { token: tokenOf(mail) } });
  t.is(r.status, 400, r.text);
  t.is(r.body.message, 'invalid or expired token');
});

test('an address held by a deleted account gets no registration link, and a link issued before answers a plain 409', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const u = await registered('held');
  // A registration link for the address, issued while the account was still... not registered: a
  // second person asks before the first one's account is deleted; the slot of the first mail has passed.
  const other = freshEmail('held-other');
  await s.request('POST', '/v1/auth/register', { body: { email: other, password: 'other-password-1' } });
  const early = await mailbox().waitFor(other);

  t.is((await s.request('DELETE', `/v1/users/${u.id}`, { token: admin.token })).status, 204);
  await s.redis.del(...(await s.redis.keys(`${s.config.redisPrefix}mailslot:register:*`)));
  const again = await s.request('POST', '/v1/auth/register', { body: { email: u.email, password: 'new-person-1' } });
  t.is(again.status, 202);
  // A control registration after it: once its mail is out, the first request's work is done too.
  const control = freshEmail('held-control');
  await s.request('POST', '/v1/auth/register', { body: { email: control, password: 'control-pass-1' } });
  await mailbox().waitFor(control);
  t.deepEqual(
    await s.db('email_outbox').where('to_address', u.email).orderBy('created_at').pluck('template'),
    ['registration'],
    'only the first registration mail of the deleted account',
  );

  // The other address is taken by a deleted account meanwhile: its old link answers a plain 409.
  const [acct] = await s.db('platform_accounts').where('user_id', u.id).select('id');
  await s.db('platform_accounts').where('id', acct.id).update({ email: other, platform_user_id: other });
  const late = await s.request('POST', '/v1/auth/register/verify', { body: { token: tokenOf(early) } });
  t.is(late.status, 409, late.text);
  t.is(late.body.message, 'email is already in use');
});

test("mails to an address of the caller's choosing: one per address per minute, and a per-account hourly cap", async (t) => {
  const s = stack();
  const u = await registered('flood');
  const victim = freshEmail('victim');
  const first = await s.request('POST', `/v1/users/${u.id}/email/request-change`, {
    token: u.token,
    body: { email: victim },
  });
  t.is(first.status, 200, first.text);
  const second = await s.request('POST', `/v1/users/${u.id}/email/request-change`, {
    token: u.token,
    body: { email: victim },
  });
  t.is(second.status, 429, second.text);
  t.regex(second.body.message, /per address per minute/);
  const wait = Number(second.headers.get('retry-after'));
  t.true(wait > 0 && wait <= 60, `Retry-After ${wait}`);
  // Spec §8's headers describe the limit that refused, not the general tier that still has room.
  t.is(second.headers.get('x-ratelimit-remaining'), '0');
  t.is(second.headers.get('x-ratelimit-limit'), '1');
  t.true(Math.abs(Number(second.headers.get('x-ratelimit-reset')) - (Date.now() / 1000 + wait)) <= 2);
  // The email-link flow shares the address's slot.
  const provider = await createUser(s.db);
  await s.db('platform_accounts').where('user_id', provider.id).delete();
  const link = await s.request('POST', `/v1/users/${provider.id}/email-link/request`, {
    token: provider.token,
    body: { email: victim, password: 'link-password-1' },
  });
  t.is(link.status, 429, link.text);

  // Other addresses: the account's hourly allowance, then 429 until the hour is over.
  for (let i = 1; i < ADDRESS_MAILS_PER_HOUR; i++) {
    const r = await s.request('POST', `/v1/users/${u.id}/email/request-change`, {
      token: u.token,
      body: { email: freshEmail(`victim${i}`) },
    });
    t.is(r.status, 200, r.text);
  }
  const over = await s.request('POST', `/v1/users/${u.id}/email/request-change`, {
    token: u.token,
    body: { email: freshEmail('victim-over') },
  });
  t.is(over.status, 429, over.text);
  t.true(Number(over.headers.get('retry-after')) > 60);
  // The headers name the limit that refused: the account's hourly cap, not the address's minute.
  t.is(over.headers.get('x-ratelimit-limit'), String(ADDRESS_MAILS_PER_HOUR));
  t.is(over.headers.get('x-ratelimit-remaining'), '0');
  t.is(
    Number((await s.db('email_outbox').where({ user_id: u.id, template: 'email_change' }).count({ n: '*' }))[0].n),
    ADDRESS_MAILS_PER_HOUR,
  );
});

test('whether an address is taken is told at the pace of the mails: a 409 uses the allowance too', async (t) => {
  const s = stack();
  const u = await registered('prober');
  const taken = await createUser(s.db);
  const change = (email: string) =>
    s.request('POST', `/v1/users/${u.id}/email/request-change`, { token: u.token, body: { email } });
  const first = await change(taken.email);
  t.is(first.status, 409, first.text);
  t.is(first.body.message, 'email is already in use');
  // The same taken address again within the minute: refused like a second mail to it.
  t.is((await change(taken.email)).status, 429);
  // From any other account too: the minute is the address's (README, "What a link proves").
  const another = await registered('prober2');
  const fromAnother = await s.request('POST', `/v1/users/${another.id}/email/request-change`, {
    token: another.token,
    body: { email: taken.email },
  });
  t.is(fromAnother.status, 429, fromAnother.text);
  // Probing other taken addresses uses up the account's hourly allowance like mails would.
  for (let i = 1; i < ADDRESS_MAILS_PER_HOUR; i++) {
    const other = await createUser(s.db);
    t.is((await change(other.email)).status, 409);
  }
  const last = await createUser(s.db);
  const over = await change(last.email);
  t.is(over.status, 429, over.text);
  t.is(over.headers.get('x-ratelimit-limit'), String(ADDRESS_MAILS_PER_HOUR));
  // Same for the email-link flow.
  const provider = await createUser(s.db);
  await s.db('platform_accounts').where('user_id', provider.id).delete();
  const link = (email: string) =>
    s.request('POST', `/v1/users/${provider.id}/email-link/request`, {
      token: provider.token,
      body: { email, password: 'link-password-1' },
    });
  const linkTaken = await createUser(s.db);
  t.is((await link(linkTaken.email)).status, 409);
  t.is((await link(linkTaken.email)).status, 429);
});
