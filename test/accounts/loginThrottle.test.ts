import test from 'ava';
import { LOGIN_THROTTLE } from '../../shared/commands/loginThrottle';
import { tokenOf } from './mailbox';
import { freshEmail, useAccountsStack } from './setup';

const { stack, mailbox } = useAccountsStack(test);

async function registered(password: string): Promise<{ email: string; id: string }> {
  const s = stack();
  const email = freshEmail('thr');
  await s.request('POST', '/v1/auth/register', { body: { email, password } });
  const v = await s.request('POST', '/v1/auth/register/verify', { body: { token: tokenOf(await mailbox().waitFor(email)) } });
  return { email, id: v.body.data.id };
}

// Serial: the per-IP counter is shared by every request of this file (all from 127.0.0.1).
test.serial('per account: past the threshold even the right password gets 429 with Retry-After; a reset clears it', async (t) => {
  const s = stack();
  const { email, id } = await registered('right-password');
  for (let i = 0; i < LOGIN_THROTTLE.account.max; i++) {
    t.is((await s.request('POST', '/v1/auth/login', { body: { email, password: `wrong-${i}` } })).status, 401);
  }
  const blocked = await s.request('POST', '/v1/auth/login', { body: { email, password: 'right-password' } });
  t.is(blocked.status, 429);
  t.is(blocked.body.error, 'TooManyRequests');
  const retry = Number(blocked.headers.get('retry-after'));
  t.true(retry > 0 && retry <= LOGIN_THROTTLE.account.windowSeconds, String(retry));
  const failures = await s.db('audit_events').where({ user_id: id, event_type: 'login_failed' });
  t.is(failures.length, LOGIN_THROTTLE.account.max + 1);
  t.true(failures.some((f) => f.metadata.reason === 'too_many_attempts'));

  // Another account from the same IP is not locked by this one.
  const other = await registered('other-password');
  t.is((await s.request('POST', '/v1/auth/login', { body: { email: other.email, password: 'other-password' } })).status, 200);

  // A password reset proves the mailbox and lifts the account's cool-down.
  await s.request('POST', '/v1/auth/reset-password/request', { body: { email } });
  const mail = await mailbox().waitFor(email, (m) => m.subject === 'Reset your password');
  t.is((await s.request('POST', '/v1/auth/reset-password/confirm', { body: { token: tokenOf(mail), password: 'brand-new-pass' } })).status, 200);
  t.is((await s.request('POST', '/v1/auth/login', { body: { email, password: 'brand-new-pass' } })).status, 200);
  await s.redis.del(...(await s.redis.keys(`${s.config.redisPrefix}loginfail:*`)));
});

test.serial('per IP: many failures across addresses lock the IP; the system key relays the client IP', async (t) => {
  const s = stack();
  const { email } = await registered('ip-password');
  for (let i = 0; i < LOGIN_THROTTLE.ip.max; i++) {
    t.is((await s.request('POST', '/v1/auth/login', { body: { email: freshEmail(`spray${i}`), password: 'nope-nope' } })).status, 401);
  }
  const blocked = await s.request('POST', '/v1/auth/login', { body: { email, password: 'ip-password' } });
  t.is(blocked.status, 429);
  t.truthy(blocked.headers.get('retry-after'));
  // The web app (system key) signs in a user from another address: not locked by 127.0.0.1's failures.
  const relayed = await s.request('POST', '/v1/auth/login', { token: s.systemKey, body: { email, password: 'ip-password' }, headers: { 'x-forwarded-for': '203.0.113.7' } });
  t.is(relayed.status, 200, relayed.text);
  const session = await s.db('sessions').where('user_id', relayed.body.data.id).orderBy('created_at', 'desc').first();
  t.is(session.ip_address, '203.0.113.7');
  await s.redis.del(...(await s.redis.keys(`${s.config.redisPrefix}loginfail:*`)));
});
