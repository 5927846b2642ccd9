import test from 'ava';
import { LOGIN_THROTTLE, releaseAttempt, reserveAttempt } from '../../shared/caches/loginThrottle';
import { tokenOf } from '../helpers/mailbox';
import { freshEmail, useAccountsStack } from '../helpers/accounts';
import { eventually, sleep } from '../helpers/wait';

const { stack, mailbox } = useAccountsStack(test);

async function registered(password: string): Promise<{ email: string; id: string }> {
  const s = stack();
  const email = freshEmail('thr');
  await s.request('POST', '/v1/auth/register', { body: { email, password } });
  const v = await s.request('POST', '/v1/auth/register/verify', {
    body: { token: tokenOf(await mailbox().waitFor(email)) },
  });
  return { email, id: v.body.data.id };
}

/** The user's login_failed events once at least `n` are written (the buffered writer writes them moments later). */
async function loginFailures(userId: string, n: number) {
  const q = () => stack().db('audit_events').where({ user_id: userId, event_type: 'login_failed' });
  await eventually(async () => (await q()).length >= n);
  await sleep(100);
  return q();
}

// Serial: the per-IP counter is shared by every request of this file (all from 127.0.0.1).
test.serial(
  'per account: past the threshold even the right password gets 429 with Retry-After; a reset clears it',
  async (t) => {
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
    t.is(blocked.headers.get('x-ratelimit-remaining'), '0');
    t.is(blocked.headers.get('x-ratelimit-limit'), String(LOGIN_THROTTLE.account.max));
    // login_failed goes through the buffered audit writer: written within moments, not before the answer.
    const failures = await loginFailures(id, LOGIN_THROTTLE.account.max + 1);
    t.is(failures.length, LOGIN_THROTTLE.account.max + 1);
    t.true(failures.some((f) => f.metadata.reason === 'too_many_attempts'));

    // Another account from the same IP is not locked by this one.
    const other = await registered('other-password');
    t.is(
      (await s.request('POST', '/v1/auth/login', { body: { email: other.email, password: 'other-password' } })).status,
      200,
    );

    // A password reset proves the mailbox and lifts the account's cool-down.
    await s.request('POST', '/v1/auth/reset-password/request', { body: { email } });
    const mail = await mailbox().waitFor(email, (m) => m.subject === 'Reset your password');
    t.is(
      (
        await s.request('POST', '/v1/auth/reset-password/confirm', {
          body: { token: tokenOf(mail), password: 'brand-new-pass' },
        })
      ).status,
      200,
    );
    t.is((await s.request('POST', '/v1/auth/login', { body: { email, password: 'brand-new-pass' } })).status, 200);
    await s.db('attempt_counters').where('key', 'like', 'login:%').delete();
  },
);

test.serial('per IP: many failures across addresses lock the IP; the system key relays the client IP', async (t) => {
  const s = stack();
  const { email } = await registered('ip-password');
  for (let i = 0; i < LOGIN_THROTTLE.ip.max; i++) {
    t.is(
      (await s.request('POST', '/v1/auth/login', { body: { email: freshEmail(`spray${i}`), password: 'nope-nope' } }))
        .status,
      401,
    );
  }
  const blocked = await s.request('POST', '/v1/auth/login', { body: { email, password: 'ip-password' } });
  t.is(blocked.status, 429);
  t.truthy(blocked.headers.get('retry-after'));
  // The headers name the limit that refused: the IP's, not the account's.
  t.is(blocked.headers.get('x-ratelimit-limit'), String(LOGIN_THROTTLE.ip.max));
  t.is(blocked.headers.get('x-ratelimit-remaining'), '0');
  // The web app (system key) signs in a user from another address: not locked by 127.0.0.1's failures.
  const relayed = await s.request('POST', '/v1/auth/login', {
    token: s.systemKey,
    body: { email, password: 'ip-password' },
    headers: { 'x-forwarded-for': '203.0.113.7' },
  });
  t.is(relayed.status, 200, relayed.text);
  const session = await s.db('sessions').where('user_id', relayed.body.data.id).orderBy('created_at', 'desc').first();
  t.is(session.ip_address, '203.0.113.7');
  await s.db('attempt_counters').where('key', 'like', 'login:%').delete();
});

test.serial(
  'per IP: an IPv6 client is counted by its /64, so rotating addresses inside it does not reset the counter',
  async (t) => {
    const s = stack();
    const { email } = await registered('v6-password');
    // The web app relays failures from a new address of one /64 each time.
    for (let i = 1; i <= LOGIN_THROTTLE.ip.max; i++) {
      const r = await s.request('POST', '/v1/auth/login', {
        token: s.systemKey,
        body: { email: freshEmail(`v6spray${i}`), password: 'nope-nope' },
        headers: { 'x-forwarded-for': `2001:db8:5:6:${i.toString(16)}::${i}` },
      });
      t.is(r.status, 401);
    }
    const relay = (ip: string) =>
      s.request('POST', '/v1/auth/login', {
        token: s.systemKey,
        body: { email, password: 'v6-password' },
        headers: { 'x-forwarded-for': ip },
      });
    // Yet another address of that /64 is refused on the IP counter, even with the right password.
    const blocked = await relay('2001:db8:5:6:ffff:ffff:ffff:fffe');
    t.is(blocked.status, 429);
    t.regex(blocked.body.message, /too many failed sign-in attempts/);
    // The neighbouring /64 is another client.
    t.is((await relay('2001:db8:5:7::1')).status, 200);
    t.truthy(await s.db('attempt_counters').where('key', 'login:ip:2001:db8:5:6::/64').first());
    await s.db('attempt_counters').where('key', 'like', 'login:%').delete();
  },
);

/** Status counts of a burst of concurrent sign-ins relayed by the system key for one client IP. */
async function burst(bodies: Array<{ email: string; password: string }>, ip: string) {
  const s = stack();
  const headers = { 'x-forwarded-for': ip };
  const login = (body: { email: string; password: string }) =>
    s.request('POST', '/v1/auth/login', { token: s.systemKey, body, headers });
  const results = await Promise.all(bodies.map(login));
  const count = (status: number) => results.filter((r) => r.status === status).length;
  return { results, ok: count(200), wrong: count(401), blocked: count(429) };
}

test.serial(
  'per account, concurrent: a burst of guesses with the right password among them evaluates at most the threshold',
  async (t) => {
    const s = stack();
    const { email, id } = await registered('right-password');
    const max = LOGIN_THROTTLE.account.max;
    const bodies = Array.from({ length: 3 * max - 1 }, (_, i) => ({ email, password: `wrong-${i}` }));
    bodies.push({ email, password: 'right-password' });
    const r = await burst(bodies, '198.51.100.11');
    t.true(r.ok + r.wrong <= max, `evaluated ${r.ok + r.wrong} (200: ${r.ok}, 401: ${r.wrong}) of ${bodies.length}`);
    t.is(r.ok + r.wrong + r.blocked, bodies.length);
    t.true(r.results.filter((x) => x.status === 429).every((x) => Number(x.headers.get('retry-after')) > 0));
    // Relayed by the system key: spec §8 sends it no X-RateLimit-* headers, on a lock-out's 429 either.
    t.true(r.results.filter((x) => x.status === 429).every((x) => x.headers.get('x-ratelimit-limit') === null));
    // Every request that did not sign in wrote its login_failed event (wrong_password or too_many_attempts).
    const failures = await loginFailures(id, r.wrong + r.blocked);
    t.is(failures.length, r.wrong + r.blocked);
    t.is(failures.filter((f) => f.metadata.reason === 'too_many_attempts').length, r.blocked);
    await s.db('attempt_counters').where('key', 'like', 'login:%').delete();
  },
);

test.serial(
  'per account, concurrent: 3× the threshold of wrong guesses at once get exactly the threshold of 401s, the rest 429',
  async (t) => {
    const s = stack();
    const { email } = await registered('right-password');
    const max = LOGIN_THROTTLE.account.max;
    const r = await burst(
      Array.from({ length: 3 * max }, (_, i) => ({ email, password: `wrong-${i}` })),
      '198.51.100.12',
    );
    t.is(r.wrong, max, `401: ${r.wrong}, 429: ${r.blocked}`);
    t.is(r.blocked, 2 * max);
    // Still locked for the right password afterwards.
    t.is((await burst([{ email, password: 'right-password' }], '198.51.100.12')).blocked, 1);
    await s.db('attempt_counters').where('key', 'like', 'login:%').delete();
  },
);

test.serial(
  'per IP, concurrent: 3× the IP threshold of guesses across addresses get exactly the threshold of 401s',
  async (t) => {
    const s = stack();
    const max = LOGIN_THROTTLE.ip.max;
    const r = await burst(
      Array.from({ length: 3 * max }, (_, i) => ({ email: freshEmail(`burst${i}`), password: 'nope-nope' })),
      '198.51.100.13',
    );
    t.is(
      r.wrong,
      max,
      `401: ${r.wrong}, 429: ${r.blocked}, other: ${r.results.filter((x) => ![401, 429].includes(x.status)).map((x) => x.status)}`,
    );
    t.is(r.blocked, 2 * max);
    await s.db('attempt_counters').where('key', 'like', 'login:%').delete();
  },
);

test('the counters are atomic in the database: concurrent attempts past the limit are refused, a release frees one', async (t) => {
  const db = stack().db;
  const counters = [
    { key: `atomic:${Date.now()}:${Math.random()}`, limit: { max: 3, windowSeconds: 60 } },
    { key: `atomic-ip:${Date.now()}:${Math.random()}`, limit: { max: 50, windowSeconds: 60 } },
  ];
  const burst = await Promise.all(Array.from({ length: 20 }, () => reserveAttempt(db, counters)));
  const passed = burst.filter((r) => r.retryAfterSeconds === 0);
  t.is(passed.length, 3);
  t.true(burst.every((r) => r.retryAfterSeconds === 0 || (r.retryAfterSeconds > 0 && r.retryAfterSeconds <= 60)));
  // A refused attempt counted nowhere: the second counter holds the three that passed.
  const row = await db('attempt_counters').where('key', counters[1].key).first();
  t.is(row.count, 3);
  // Giving one back (the right password) frees one attempt.
  await releaseAttempt(db, passed[0]);
  t.is((await reserveAttempt(db, counters)).retryAfterSeconds, 0);
  t.true((await reserveAttempt(db, counters)).retryAfterSeconds > 0);
});
