import test from 'ava';
import { createSession } from '../../shared/commands/sessions';
import { createUser } from '../helpers/factories';
import { tokenOf } from '../helpers/mailbox';
import { freshEmail, useAccountsStack } from '../helpers/accounts';

/**
 * One address, one live account, and it is the account that proved the address: an address a
 * provider-only user typed in (PATCH, never verified) goes to whoever proves it (a provider's
 * sign-in, a registration, a confirmed email change or link), and is taken off the typing user.
 */
const { stack, mailbox } = useAccountsStack(test);
let n = 0;
const uniq = () => `${Date.now().toString(36)}${n++}`;

/** A provider-only user (no address) who then types `email` in through PATCH. */
async function squatter(email: string) {
  const s = stack();
  const made = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { email: null, name: 'Typist', oauthProvider: 'github', oauthProviderId: `typist-${uniq()}` },
  });
  const id = made.body.data.id as string;
  const { token } = await createSession(s.db, id, new Date(Date.now() + 3600_000), { platformSlug: 'github' });
  const typed = await s.request('PATCH', `/v1/users/${id}`, { token, body: { email } });
  if (typed.status !== 200) throw new Error(typed.text);
  return { id, token };
}

/** What the system key's lookup finds for `email`, and the squatter's address and events after. */
async function outcome(email: string, squatterId: string) {
  const s = stack();
  const found = await s.request('GET', `/v1/users/email/${encodeURIComponent(email)}`, { token: s.systemKey });
  const holders = await s
    .db('platform_accounts as pa')
    .join('users as u', 'u.id', 'pa.user_id')
    .whereNull('u.deleted_at')
    .whereRaw('lower(pa.email) = ?', [email])
    .distinct('pa.user_id');
  // Every account of the typist, the one that carried the address among them.
  const typed = await s.db('platform_accounts').where('user_id', squatterId).pluck('email');
  const events = await s
    .db('audit_events')
    .where({ user_id: squatterId, event_type: 'user_updated' })
    .whereRaw("metadata->>'reason' = 'address_proven_by_another_account'")
    .select('metadata');
  return {
    found: found.body.data?.id as string | undefined,
    holders: holders.map((h) => h.user_id),
    typed,
    events,
  };
}

test('a provider sign-in with an address another user only typed in makes its own user and takes the address', async (t) => {
  const s = stack();
  const email = freshEmail('typed-oauth');
  const typist = await squatter(email);
  const signin = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { email, name: 'Owner', oauthProvider: 'google', oauthProviderId: `g-${uniq()}` },
  });
  t.is(signin.status, 200, signin.text);
  const owner = signin.body.data.id;
  t.not(owner, typist.id, 'never linked to the account that only typed the address in');
  const after = await outcome(email, typist.id);
  t.is(after.found, owner);
  t.deepEqual(after.holders, [owner]);
  t.deepEqual(after.typed, [null]);
  t.deepEqual(
    after.events.map((e) => e.metadata.fields),
    [['email']],
  );
  // The typist cannot type it back in.
  const back = await s.request('PATCH', `/v1/users/${typist.id}`, { token: typist.token, body: { email } });
  t.is(back.status, 409, back.text);
});

test('a registration of an address another user only typed in succeeds and takes it', async (t) => {
  const s = stack();
  const email = freshEmail('typed-reg');
  const typist = await squatter(email);
  const asked = await s.request('POST', '/v1/auth/register', { body: { email, password: 'owner-password-1' } });
  t.is(asked.status, 202, asked.text);
  const mail = await mailbox().waitFor(email);
  t.is(mail.subject.includes('already'), false, 'a registration mail, not "someone tried your address"');
  const v = await s.request('POST', '/v1/auth/register/verify', { body: { token: tokenOf(mail) } });
  t.is(v.status, 201, v.text);
  const after = await outcome(email, typist.id);
  t.is(after.found, v.body.data.id);
  t.deepEqual(after.holders, [v.body.data.id]);
  t.deepEqual(after.typed, [null]);
  t.is(after.events.length, 1);
});

for (const flow of ['email change', 'email link'] as const)
  test(`a confirmed ${flow} to an address another user only typed in takes it`, async (t) => {
    const s = stack();
    const email = freshEmail(flow === 'email change' ? 'typed-chg' : 'typed-link');
    const typist = await squatter(email);
    // An email sign-in (change), or a provider-only user without one (link).
    const user =
      flow === 'email change'
        ? await createUser(s.db)
        : await (async () => {
            const u = await createUser(s.db);
            await s.db('platform_accounts').where('user_id', u.id).delete();
            return u;
          })();
    const path = flow === 'email change' ? 'email/request-change' : 'email-link/request';
    const body = flow === 'email change' ? { email } : { email, password: 'link-password-1' };
    const asked = await s.request('POST', `/v1/users/${user.id}/${path}`, { token: user.token, body });
    t.is(asked.status, 200, asked.text);
    const verify = flow === 'email change' ? '/v1/users/email/verify' : '/v1/users/email-link/verify';
    const ok = await s.request('POST', verify, {
      token: user.token,
      body: { token: tokenOf(await mailbox().waitFor(email)) },
    });
    t.is(ok.status, 200, ok.text);
    const after = await outcome(email, typist.id);
    t.is(after.found, user.id);
    t.deepEqual(after.holders, [user.id]);
    t.deepEqual(after.typed, [null]);
    // Proven now: the typist cannot type it back in.
    const back = await s.request('PATCH', `/v1/users/${typist.id}`, { token: typist.token, body: { email } });
    t.is(back.status, 409, back.text);
  });
