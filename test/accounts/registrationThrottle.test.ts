import test from 'ava';
import { sha256 } from '../../shared/crypto';
import { redisKey, RedisKeys } from '../../shared/redis';
import { freshEmail, useAccountsStack } from '../helpers/accounts';
import { createUser } from '../helpers/factories';

// Behind one proxy the client's address is X-Forwarded-For's last entry: each test picks its own.
const INTERNAL_TOKEN = 'web-app-internal-token';
const { stack, mailbox } = useAccountsStack(test, {
  TRUST_PROXY: 'true',
  RATE_LIMIT_REGISTER: '10',
  INTERNAL_TOKEN,
});

const register = (ip: string, email: string) =>
  stack().request('POST', '/v1/auth/register', {
    body: { email, password: 'correct horse battery' },
    headers: { 'x-forwarded-for': ip },
  });

test('the 11th registration from one IP within the window is a 429 before any hash or mail; another IP is unaffected', async (t) => {
  const s = stack();
  const ip = '198.51.100.7';
  // A taken address counts as a free one does: the answers must not tell them apart.
  const owner = await createUser(s.db);
  const emails = [owner.email, ...Array.from({ length: 9 }, () => freshEmail('throttle'))];
  for (const email of emails) {
    const r = await register(ip, email);
    t.is(r.status, 202, `${email}: ${r.text}`);
  }
  const counter = await s.db('attempt_counters').where('key', `register:ip:${ip}`).first();
  t.is(counter?.count, 10);

  const fresh = freshEmail('throttle');
  for (const email of [fresh, owner.email]) {
    const refused = await register(ip, email);
    t.is(refused.status, 429, refused.text);
    t.is(refused.body.error, 'TooManyRequests');
    t.regex(refused.body.message, /^too many registrations from this IP address; try again in \d+ seconds$/);
    const retryAfter = Number(refused.headers.get('retry-after'));
    t.true(retryAfter > 0 && retryAfter <= 900, `Retry-After ${retryAfter}`);
    t.is(refused.headers.get('x-ratelimit-limit'), '10');
  }
  // Refused before the hash and the mail: the new address's mail slot was never claimed, and no
  // token or mail was written for it (nor a second mail to the owner).
  t.is(await s.redis.exists(redisKey(s.config, RedisKeys.mailSlot('register', sha256(fresh)))), 0);
  t.is(await s.db('account_tokens').where({ purpose: 'registration', email: fresh }).first(), undefined);
  t.is(await s.db('email_outbox').where('to_address', fresh).first(), undefined);
  t.falsy(
    await s
      .db('email_outbox')
      .where('to_address', owner.email.toLowerCase())
      .where('template', 'account_exists')
      .offset(1)
      .first(),
    'one account_exists mail, from the first registration only',
  );
  t.is((await s.db('attempt_counters').where('key', `register:ip:${ip}`).first())?.count, 10, 'refusals count nothing');

  // Another IP registers as before.
  const other = freshEmail('throttle');
  const r = await register('198.51.100.8', other);
  t.is(r.status, 202, r.text);
  await mailbox().waitFor(other);
});

test('a server-side web app (X-Internal-Token) is counted per forwarded client address, never as itself', async (t) => {
  const s = stack();
  const viaWebApp = (email: string, headers: Record<string, string> = {}) =>
    s.request('POST', '/v1/auth/register', {
      body: { email, password: 'correct horse battery' },
      headers: { 'x-internal-token': INTERNAL_TOKEN, ...headers },
    });
  // Without a forwarded address the web app's own address is no client's: nothing is counted on it,
  // so visitors cannot use up registration for everyone behind the web app.
  for (let i = 0; i < 11; i++) {
    const r = await viaWebApp(freshEmail('webapp'));
    t.is(r.status, 202, `registration ${i + 1}: ${r.text}`);
  }
  const counted = await s
    .db('attempt_counters')
    .where('key', 'like', 'register:ip:%')
    .whereNot('key', 'like', 'register:ip:198.51.100.%')
    .pluck('key');
  t.deepEqual(counted, []);
  // With one, that address is counted.
  const r = await viaWebApp(freshEmail('webapp'), { 'x-forwarded-for': '203.0.113.9' });
  t.is(r.status, 202, r.text);
  t.is((await s.db('attempt_counters').where('key', 'register:ip:203.0.113.9').first())?.count, 1);
});
