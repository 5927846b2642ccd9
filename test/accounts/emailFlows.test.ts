import test from 'ava';
import { createSession } from '../../shared/commands/sessions';
import { randomToken, sha256 } from '../../shared/crypto';
import { createUser } from '../helpers/factories';
import { listenPushes } from '../helpers/pushes';
import { tokenOf } from '../helpers/mailbox';
import { lockWaiters } from '../helpers/wait';
import { freshEmail, sentOutboxRow, useAccountsStack } from '../helpers/accounts';

const { stack, mailbox } = useAccountsStack(test);

/** A user who signed in with a provider only (no email account), with a session token. */
async function providerUser(tag: string) {
  const s = stack();
  const r = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: {
      email: freshEmail(tag),
      name: `Prov ${tag}`,
      oauthProvider: 'github',
      oauthProviderId: `gh-${tag}-${Date.now()}-${Math.random()}`,
    },
  });
  const { token } = await createSession(stack().db, r.body.data.id, new Date(Date.now() + 3600_000), {
    platformSlug: 'github',
  });
  return { id: r.body.data.id as string, email: r.body.data.email as string, token };
}

/**
 * Sends `requests` while the test holds `userId`'s row locked, until all of them wait on a lock
 * (the row, or one they take themselves), then lets them go on together: requests of one user
 * lined up to run at once. Serial tests only (ava runs them before the others), so that the
 * waiters counted are these requests.
 */
async function atOnce<R>(userId: string, requests: Array<() => Promise<R>>): Promise<R[]> {
  const s = stack();
  const trx = await s.db.transaction();
  try {
    await trx('users').where('id', userId).forUpdate().first('id');
    const pending = Promise.all(requests.map((send) => send()));
    await lockWaiters(s.db, requests.length);
    await trx.commit();
    return await pending;
  } finally {
    if (!trx.isCompleted()) await trx.rollback();
  }
}

for (const flow of [
  { name: 'email change', request: 'email/request-change', pending: 'email/pending', verify: 'email/verify' },
  { name: 'email link', request: 'email-link/request', pending: 'email-link/pending', verify: 'email-link/verify' },
]) {
  test.serial(`${flow.name}: of two requests sent at once only the newest one's token works`, async (t) => {
    const s = stack();
    const user = flow.name === 'email change' ? await createUser(s.db) : await providerUser('both');
    const addresses = [freshEmail('race1'), freshEmail('race2')];
    const asked = await atOnce(
      user.id,
      addresses.map(
        (email) => () =>
          s.request('POST', `/v1/users/${user.id}/${flow.request}`, {
            token: user.token,
            body: flow.name === 'email change' ? { email } : { email, password: 'linked-password' },
          }),
      ),
    );
    t.deepEqual(
      asked.map((r) => r.status),
      [200, 200],
      asked.map((r) => r.text).join(),
    );
    const pending = await s.request('GET', `/v1/users/${user.id}/${flow.pending}`, { token: user.token });
    const newest = pending.body.new_email ?? pending.body.email;
    t.true(addresses.includes(newest), pending.text);
    const [replaced] = addresses.filter((a) => a !== newest);
    const verify = async (address: string) =>
      s.request('POST', `/v1/users/${flow.verify}`, {
        token: user.token,
        body: { token: tokenOf(await mailbox().waitFor(address)) },
      });
    const old = await verify(replaced);
    t.is(old.status, 400, `the replaced request's token: ${old.text}`);
    t.is(old.body.message, 'invalid or expired token');
    t.is((await verify(newest)).status, 200);
  });
}

test.serial('email change: a link used while a new one is requested: both answer, no deadlock', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const first = freshEmail('first');
  const asked = await s.request('POST', `/v1/users/${user.id}/email/request-change`, {
    token: user.token,
    body: { email: first },
  });
  t.is(asked.status, 200, asked.text);
  const link = tokenOf(await mailbox().waitFor(first));
  const second = freshEmail('second');
  // The link's use queues on the user row first, then a new request behind it.
  const trx = await s.db.transaction();
  let answers: Array<{ status: number; text: string }>;
  try {
    await trx('users').where('id', user.id).forUpdate().first('id');
    const verify = s.request('POST', '/v1/users/email/verify', { token: user.token, body: { token: link } });
    await lockWaiters(s.db, 1);
    const request = s.request('POST', `/v1/users/${user.id}/email/request-change`, {
      token: user.token,
      body: { email: second },
    });
    await lockWaiters(s.db, 2);
    await trx.commit();
    answers = await Promise.all([verify, request]);
  } finally {
    if (!trx.isCompleted()) await trx.rollback();
  }
  t.deepEqual(
    answers.map((a) => a.status),
    [200, 200],
    answers.map((a) => a.text).join(),
  );
  const pending = await s.request('GET', `/v1/users/${user.id}/email/pending`, { token: user.token });
  t.is(pending.body.new_email, second, 'the new request stands');
});

test.serial('email link: two link tokens used at once give the account one email sign-in, the other 409', async (t) => {
  const s = stack();
  const prov = await providerUser('twice');
  // Two live link tokens of one user, as parallel requests left them before they were serialised.
  const tokens = [randomToken('', 32), randomToken('', 32)];
  await s.db('account_tokens').insert(
    tokens.map((token) => {
      const email = freshEmail('twice');
      return {
        token_hash: sha256(token),
        purpose: 'email_link',
        user_id: prov.id,
        email,
        payload: { email, password_hash: 'not-a-hash' },
        expires_at: new Date(Date.now() + 3600_000),
      };
    }),
  );
  const used = await atOnce(
    prov.id,
    tokens.map(
      (token) => () => s.request('POST', '/v1/users/email-link/verify', { token: prov.token, body: { token } }),
    ),
  );
  t.deepEqual(used.map((r) => r.status).sort(), [200, 409], used.map((r) => r.text).join());
  t.is(used.find((r) => r.status === 409)?.body.message, 'this account already has an email sign-in');
  const emailAccounts = await s
    .db('platform_accounts')
    .join('platforms', 'platforms.id', 'platform_accounts.platform_id')
    .where({ 'platform_accounts.user_id': prov.id, 'platforms.slug': 'email' });
  t.is(emailAccounts.length, 1);
});

test('email change: request → pending → mail to the new address → verify → address changed, push, login with the new address', async (t) => {
  const s = stack();
  const email = freshEmail('chg');
  await s.request('POST', '/v1/auth/register', { body: { email, password: 'change-me-123' } });
  const v = await s.request('POST', '/v1/auth/register/verify', {
    body: { token: tokenOf(await mailbox().waitFor(email)) },
  });
  const userId = v.body.data.id;
  const login = await s.request('POST', '/v1/auth/login', { body: { email, password: 'change-me-123' } });
  const token = login.body.session.sessionToken;

  t.deepEqual((await s.request('GET', `/v1/users/${userId}/email/pending`, { token })).body, {
    pending: false,
    new_email: null,
    expires_at: null,
  });
  const next = freshEmail('next');
  const req = await s.request('POST', `/v1/users/${userId}/email/request-change`, {
    token,
    body: { email: next.toUpperCase() },
  });
  t.is(req.status, 200, req.text);
  t.truthy(req.body.message);
  const expires = new Date(req.body.expires_at).getTime();
  t.true(Math.abs(expires - (Date.now() + 24 * 3600_000)) < 60_000);
  const pending = await s.request('GET', `/v1/users/${userId}/email/pending`, { token });
  t.deepEqual(pending.body, { pending: true, new_email: next, expires_at: req.body.expires_at });

  const mail = await mailbox().waitFor(next);
  t.is(mail.subject, 'Confirm your new email address');
  t.regex(mail.text, /\/account\/email\/verify\?token=/);
  // The link works (below), but the outbox row of the sent mail does not hold its token.
  t.false((await sentOutboxRow(s.db, next, 'email_change')).includes(tokenOf(mail)));
  // Nothing changed yet.
  t.is((await s.request('POST', '/v1/auth/login', { body: { email, password: 'change-me-123' } })).status, 200);

  const stranger = await createUser(s.db);
  t.is(
    (await s.request('POST', '/v1/users/email/verify', { token: stranger.token, body: { token: tokenOf(mail) } }))
      .status,
    400,
  );

  const pushes = await listenPushes(s.redis, s.config, `user:${userId}`);
  try {
    const ok = await s.request('POST', '/v1/users/email/verify', { token, body: { token: tokenOf(mail) } });
    t.is(ok.status, 200, ok.text);
    t.true(ok.body.success);
    const push = await pushes.waitFor((m) => m.type === 'emailChangeVerified');
    t.deepEqual({ userId: push.userId, email: push.email }, { userId, email: next });
    t.truthy(push.timestamp);
  } finally {
    pushes.close();
  }
  t.is((await s.request('POST', '/v1/users/email/verify', { token, body: { token: tokenOf(mail) } })).status, 400);
  t.is((await s.request('GET', `/v1/users/${userId}/email/pending`, { token })).body.pending, false);
  t.is((await s.request('POST', '/v1/auth/login', { body: { email, password: 'change-me-123' } })).status, 401);
  t.is((await s.request('POST', '/v1/auth/login', { body: { email: next, password: 'change-me-123' } })).status, 200);
});

test('email change refusals: 400 invalid / not an email account / same address, 404, 409 in use, expired 400, cancel', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const other = await createUser(s.db);
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const bad = await s.request('POST', `/v1/users/${user.id}/email/request-change`, {
    token: user.token,
    body: { email: 'nope' },
  });
  t.is(bad.status, 400);
  t.regex(bad.body.message, /^email/);
  t.is(
    (
      await s.request('POST', `/v1/users/${user.id}/email/request-change`, {
        token: user.token,
        body: { email: user.email },
      })
    ).status,
    400,
  );
  t.is(
    (
      await s.request('POST', `/v1/users/${user.id}/email/request-change`, {
        token: user.token,
        body: { email: other.email },
      })
    ).status,
    409,
  );
  t.is(
    (
      await s.request('POST', '/v1/users/00000000-0000-4000-8000-000000000000/email/request-change', {
        token: admin.token,
        body: { email: freshEmail() },
      })
    ).status,
    404,
  );
  t.is(
    (
      await s.request('POST', `/v1/users/${other.id}/email/request-change`, {
        token: user.token,
        body: { email: freshEmail() },
      })
    ).status,
    403,
  );
  const prov = await providerUser('noemail');
  const notEmail = await s.request('POST', `/v1/users/${prov.id}/email/request-change`, {
    token: prov.token,
    body: { email: freshEmail() },
  });
  t.is(notEmail.status, 400);
  t.regex(notEmail.body.message, /no email sign-in/);

  // Cancel: 200 then 404 (none pending); the cancelled token is dead.
  const first = freshEmail('c1');
  await s.request('POST', `/v1/users/${user.id}/email/request-change`, { token: user.token, body: { email: first } });
  const mail = await mailbox().waitFor(first);
  t.is((await s.request('DELETE', `/v1/users/${user.id}/email/pending`, { token: user.token })).status, 200);
  t.is((await s.request('DELETE', `/v1/users/${user.id}/email/pending`, { token: user.token })).status, 404);
  t.is(
    (await s.request('POST', '/v1/users/email/verify', { token: user.token, body: { token: tokenOf(mail) } })).status,
    400,
  );

  // Expired after 24 hours.
  const second = freshEmail('c2');
  await s.request('POST', `/v1/users/${user.id}/email/request-change`, { token: user.token, body: { email: second } });
  const mail2 = await mailbox().waitFor(second);
  await s
    .db('account_tokens')
    .where({ user_id: user.id, purpose: 'email_change' })
    .whereNull('used_at')
    .update({ expires_at: new Date(Date.now() - 1000) });
  t.is((await s.request('GET', `/v1/users/${user.id}/email/pending`, { token: user.token })).body.pending, false);
  t.is(
    (await s.request('POST', '/v1/users/email/verify', { token: user.token, body: { token: tokenOf(mail2) } })).status,
    400,
  );

  // Taken between request and verify: 409.
  const third = freshEmail('c3');
  await s.request('POST', `/v1/users/${user.id}/email/request-change`, { token: user.token, body: { email: third } });
  const mail3 = await mailbox().waitFor(third);
  await s.db('platform_accounts').where('user_id', other.id).update({ email: third });
  t.is(
    (await s.request('POST', '/v1/users/email/verify', { token: user.token, body: { token: tokenOf(mail3) } })).status,
    409,
  );
});

test('email link: request → pending → verify → email account, push, and email+password sign-in works', async (t) => {
  const s = stack();
  const prov = await providerUser('link');
  t.deepEqual((await s.request('GET', `/v1/users/${prov.id}/email-link/pending`, { token: prov.token })).body, {
    pending: false,
    email: null,
    expires_at: null,
  });
  const short = await s.request('POST', `/v1/users/${prov.id}/email-link/request`, {
    token: prov.token,
    body: { email: prov.email, password: 'short' },
  });
  t.is(short.status, 400);
  t.regex(short.body.message, /^password/);
  const req = await s.request('POST', `/v1/users/${prov.id}/email-link/request`, {
    token: prov.token,
    body: { email: prov.email, password: 'linked-password' },
  });
  t.is(req.status, 200, req.text);
  t.truthy(req.body.expires_at);
  const pending = await s.request('GET', `/v1/users/${prov.id}/email-link/pending`, { token: prov.token });
  t.is(pending.body.pending, true);
  t.is(pending.body.email, prov.email);
  const mail = await mailbox().waitFor(prov.email);
  t.is(mail.subject, 'Confirm email sign-in for your account');
  t.regex(mail.text, /\/account\/email-link\/verify\?token=/);
  t.false((await sentOutboxRow(s.db, prov.email, 'email_link')).includes(tokenOf(mail)));
  // Not yet linked: no sign-in.
  t.is(
    (await s.request('POST', '/v1/auth/login', { body: { email: prov.email, password: 'linked-password' } })).status,
    401,
  );

  const pushes = await listenPushes(s.redis, s.config, `user:${prov.id}`);
  let accountId: string;
  try {
    const v = await s.request('POST', '/v1/users/email-link/verify', {
      token: prov.token,
      body: { token: tokenOf(mail) },
    });
    t.is(v.status, 200, v.text);
    t.truthy(v.body.message);
    accountId = v.body.platform_account_id;
    const push = await pushes.waitFor((m) => m.type === 'emailLinkVerified');
    t.is(push.userId, prov.id);
    t.is(push.platformAccountId, accountId);
  } finally {
    pushes.close();
  }
  const acct = await s.db('platform_accounts').where('id', accountId).first();
  t.regex(acct.password_hash, /^\$argon2id\$/);
  t.false(acct.is_oauth);
  const login = await s.request('POST', '/v1/auth/login', { body: { email: prov.email, password: 'linked-password' } });
  t.is(login.status, 200);
  t.is(login.body.data.id, prov.id);
  t.is(
    (
      await s.request('POST', `/v1/users/${prov.id}/email-link/request`, {
        token: prov.token,
        body: { email: freshEmail(), password: 'linked-password' },
      })
    ).status,
    400,
  );
  t.truthy(await s.db('audit_events').where({ user_id: prov.id, event_type: 'account_linked' }).first());
});

test('email link refusals and cancel: 409 in use, cancel then 200 with nothing pending, verify-email accepts a link token too', async (t) => {
  const s = stack();
  const prov = await providerUser('lref');
  const other = await createUser(s.db);
  t.is(
    (
      await s.request('POST', `/v1/users/${prov.id}/email-link/request`, {
        token: prov.token,
        body: { email: other.email, password: 'longenough' },
      })
    ).status,
    409,
  );
  const addr = freshEmail('lc');
  await s.request('POST', `/v1/users/${prov.id}/email-link/request`, {
    token: prov.token,
    body: { email: addr, password: 'longenough' },
  });
  const m1 = await mailbox().waitFor(addr);
  const cancel = await s.request('DELETE', `/v1/users/${prov.id}/email-link/pending`, { token: prov.token });
  t.is(cancel.status, 200);
  t.truthy(cancel.body.message);
  // Nothing pending any more: still 200 (spec §4.12 names no 404 here, unlike the email change's cancel).
  const again = await s.request('DELETE', `/v1/users/${prov.id}/email-link/pending`, { token: prov.token });
  t.is(again.status, 200, again.text);
  t.is(again.body.message, 'no email link was pending');
  t.like((await s.request('GET', `/v1/users/${prov.id}/email-link/pending`, { token: prov.token })).body, {
    pending: false,
    email: null,
  });
  t.is(
    (await s.request('POST', '/v1/users/email-link/verify', { token: prov.token, body: { token: tokenOf(m1) } }))
      .status,
    400,
  );
  // The link in the mail also works without being signed in (the web app posts it to verify-email).
  const addr2 = freshEmail('lc2');
  await s.request('POST', `/v1/users/${prov.id}/email-link/request`, {
    token: prov.token,
    body: { email: addr2, password: 'longenough' },
  });
  const m2 = await mailbox().waitFor(addr2);
  const v = await s.request('POST', '/v1/auth/verify-email', { body: { token: tokenOf(m2) } });
  t.is(v.status, 200, v.text);
  t.is((await s.request('POST', '/v1/auth/login', { body: { email: addr2, password: 'longenough' } })).status, 200);
});

test('platform accounts: list, set primary, get one (the self link), unlink with the three refusals', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const other = await createUser(s.db);
  const list0 = await s.request('GET', `/v1/users/${user.id}/accounts`, { token: user.token });
  t.is(list0.status, 200);
  t.is(list0.body.data.length, 1);
  const emailAcct = list0.body.data[0];
  t.deepEqual(Object.keys(emailAcct).sort(), [
    'avatar_url',
    'created_at',
    'email',
    'id',
    'is_oauth',
    'is_primary',
    'platform_id',
    'platform_name',
    'platform_slug',
    'platform_user_id',
    'updated_at',
    'username',
  ]);
  t.is(emailAcct.platform_slug, 'email');
  t.true(emailAcct.is_primary);
  t.is(list0.body._links.self, `/v1/users/${user.id}/accounts`);
  t.is((await s.request('GET', `/v1/users/${other.id}/accounts`, { token: user.token })).status, 403);

  // The only account: it is the email account (400) — and also the last one.
  const onlyEmail = await s.request('DELETE', `/v1/users/${user.id}/accounts/${emailAcct.id}`, { token: user.token });
  t.is(onlyEmail.status, 400);
  t.regex(onlyEmail.body.message, /email sign-in account cannot be unlinked/);

  // Link two provider accounts by email.
  await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { email: user.email, name: 'gh', oauthProvider: 'github', oauthProviderId: `gh-${user.id}` },
  });
  await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { email: user.email, name: 'st', oauthProvider: 'stream', oauthProviderId: `st-${user.id}` },
  });
  const list = (await s.request('GET', `/v1/users/me/accounts`, { token: user.token })).body.data;
  t.is(list.length, 3);
  const gh = list.find((a: any) => a.platform_slug === 'github');
  const st = list.find((a: any) => a.platform_slug === 'stream');

  const prim = await s.request('PUT', `/v1/users/${user.id}/accounts/${gh.id}/primary`, { token: user.token });
  t.is(prim.status, 200);
  t.true(prim.body.data.is_primary);
  t.is(prim.body.data.id, gh.id);
  // The self link answers the account: users:read or self, and only among the user's own accounts.
  t.is(prim.body._links.self, `/v1/users/${user.id}/accounts/${gh.id}`);
  const self = await s.request('GET', prim.body._links.self, { token: user.token });
  t.is(self.status, 200, self.text);
  t.deepEqual(self.body, prim.body);
  t.deepEqual((await s.request('GET', `/v1/users/me/accounts/${gh.id}`, { token: user.token })).body, prim.body);
  t.is((await s.request('GET', prim.body._links.self, { token: other.token })).status, 403);
  const otherAcct = (await s.db('platform_accounts').where({ user_id: other.id }).first()).id;
  t.is((await s.request('GET', `/v1/users/${user.id}/accounts/${otherAcct}`, { token: user.token })).status, 404);
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  t.deepEqual((await s.request('GET', prim.body._links.self, { token: admin.token })).body.data, prim.body.data);
  t.is((await s.request('GET', `/v1/users/${other.id}/accounts/${otherAcct}`, { token: admin.token })).status, 200);
  // No such user: 404 naming the user, on the list and on one account.
  const nobody = '00000000-0000-4000-8000-000000000001';
  const noList = await s.request('GET', `/v1/users/${nobody}/accounts`, { token: admin.token });
  t.is(noList.status, 404);
  t.regex(noList.body.message, /user/);
  t.is((await s.request('GET', `/v1/users/${nobody}/accounts/${otherAcct}`, { token: admin.token })).status, 404);
  const after = (await s.request('GET', `/v1/users/${user.id}/accounts`, { token: user.token })).body.data;
  t.deepEqual(
    after.filter((a: any) => a.is_primary).map((a: any) => a.id),
    [gh.id],
  );
  t.is(
    (await s.request('GET', `/v1/users/${user.id}`, { token: user.token })).body.data.primary_platform_account_id,
    gh.id,
  );
  t.is(
    (await s.request('PUT', `/v1/users/${user.id}/accounts/${other.id}/primary`, { token: user.token })).status,
    404,
  );

  const primary = await s.request('DELETE', `/v1/users/${user.id}/accounts/${gh.id}`, { token: user.token });
  t.is(primary.status, 409);
  t.regex(primary.body.message, /primary account/);
  t.is((await s.request('DELETE', `/v1/users/${user.id}/accounts/${st.id}`, { token: user.token })).status, 204);
  t.truthy(
    await s.db('audit_events').where({ user_id: user.id, event_type: 'account_unlinked', resource_id: st.id }).first(),
  );
  t.is((await s.request('DELETE', `/v1/users/${user.id}/accounts/${st.id}`, { token: user.token })).status, 404);

  // Last account: a provider-only user cannot unlink their only account.
  const prov = await providerUser('last');
  const provAcct = (await s.request('GET', `/v1/users/${prov.id}/accounts`, { token: prov.token })).body.data[0];
  const last = await s.request('DELETE', `/v1/users/${prov.id}/accounts/${provAcct.id}`, { token: prov.token });
  t.is(last.status, 409);
  t.regex(last.body.message, /last platform account/);
});

test('with APP_URL naming a web app elsewhere, the API leaves the link paths to it (404)', async (t) => {
  const s = stack();
  const r = await s.request('GET', '/auth/reset-password?token=abc');
  t.is(r.status, 404);
  t.is(r.body.error, 'NotFound');
});
