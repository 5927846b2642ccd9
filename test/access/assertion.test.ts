import test from 'ava';
import { createHmac, randomUUID } from 'node:crypto';
import { startSecondApi } from '../helpers/secondApi';
import { appForKey, signAppAssertion, verifyAppAssertion } from '../../shared/auth/assertionVerifier';
import { loadConfig } from '../../shared/config';
import { redisKey } from '../../shared/redis';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const ID_SECRET = 'id-app-secret-0123456789';
const OTHER_SECRET = 'other-app-secret-9876543210';
const stack = useStack(test, { env: { ID_APPS: `idapp:${ID_SECRET},otherapp:${OTHER_SECRET}` } });

const now = () => Math.floor(Date.now() / 1000);
const sign = (subject: string, o: { issuedAt?: number; nonce?: string; appId?: string; secret?: string } = {}) =>
  signAppAssertion({
    appId: o.appId ?? 'idapp',
    secret: o.secret ?? ID_SECRET,
    subject,
    issuedAt: o.issuedAt,
    nonce: o.nonce,
  });
const verify = (token: string | null, nowMs?: number) =>
  verifyAppAssertion(stack().config, stack().redis, token, nowMs);
const mac = (secret: string, msg: string) => createHmac('sha256', secret).update(msg).digest('base64url');

test('a well-formed assertion verifies and yields app and subject', async (t) => {
  const subject = randomUUID();
  const r = await verify(sign(subject));
  t.true(r.ok);
  if (r.ok) {
    t.is(r.appId, 'idapp');
    t.is(r.subject, subject);
    t.true(r.nonce.startsWith('idaa_'));
  }
  // The format is exactly the spec's: five fields, HMAC-SHA256 base64url without padding.
  const token = sign(subject, { nonce: 'idaa_abcdefgh12345678', issuedAt: now() });
  const [app, sub, iat, nonce, sig] = token.split('.');
  t.is(sig, mac(ID_SECRET, `${app}|${sub}|${iat}|${nonce}`));
  t.false(sig.includes('='));
});

test('(a) an unknown app_id is rejected', async (t) => {
  const r = await verify(signAppAssertion({ appId: 'stranger', secret: ID_SECRET, subject: randomUUID() }));
  t.false(r.ok);
  if (!r.ok) t.is(r.reason, 'unknown_app');
});

test('(b) a non-canonical or non-UUID subject is malformed, even when correctly signed over that rendering', async (t) => {
  const id = randomUUID();
  for (const subject of [id.toUpperCase(), id.replace(/-/g, ''), `{${id}}`, 'not-a-uuid', id.slice(0, 35)]) {
    const r = await verify(sign(subject));
    t.false(r.ok, subject);
    if (!r.ok) t.is(r.reason, 'malformed', subject);
  }
});

test("(c) a tampered signature, subject or timestamp fails; another app's secret fails", async (t) => {
  const subject = randomUUID();
  const token = sign(subject);
  const parts = token.split('.');
  const flipped = parts[4][0] === 'A' ? 'B' : 'A';
  const cases = [
    [...parts.slice(0, 4), flipped + parts[4].slice(1)].join('.'),
    [parts[0], randomUUID(), ...parts.slice(2)].join('.'),
    [parts[0], parts[1], String(Number(parts[2]) - 1), ...parts.slice(3)].join('.'),
    [...parts.slice(0, 3), 'idaa_someothernonce123', parts[4]].join('.'),
    // Signed with the other app's secret but claiming to be idapp.
    signAppAssertion({ appId: 'idapp', secret: OTHER_SECRET, subject }),
    // A genuine otherapp assertion relabelled as idapp.
    ['idapp', ...signAppAssertion({ appId: 'otherapp', secret: OTHER_SECRET, subject }).split('.').slice(1)].join('.'),
  ];
  for (const c of cases) {
    const r = await verify(c);
    t.false(r.ok, c);
    if (!r.ok) t.is(r.reason, 'bad_signature', c);
  }
  // The genuine otherapp assertion is valid for otherapp only.
  const other = await verify(signAppAssertion({ appId: 'otherapp', secret: OTHER_SECRET, subject }));
  t.true(other.ok);
  if (other.ok) t.is(other.appId, 'otherapp');
});

test('(d) stale and future-dated assertions are rejected; the window and skew are honoured', async (t) => {
  const subject = randomUUID();
  const maxAge = stack().config.idAssertionMaxAgeSeconds;
  const skew = stack().config.idAssertionClockSkewSeconds;
  t.is(maxAge, 30);
  const stale = await verify(sign(subject, { issuedAt: now() - maxAge - 2 }));
  t.false(stale.ok);
  if (!stale.ok) t.is(stale.reason, 'stale');
  const future = await verify(sign(subject, { issuedAt: now() + skew + 3 }));
  t.false(future.ok);
  if (!future.ok) t.is(future.reason, 'future');
  t.true((await verify(sign(subject, { issuedAt: now() - maxAge + 3 }))).ok);
  t.true((await verify(sign(subject, { issuedAt: now() + Math.max(0, skew - 2) }))).ok);

  // Configurable freshness: the same 100 s old assertion passes with a 120 s window.
  const cfg = loadConfig({
    ID_APPS: `idapp:${ID_SECRET}`,
    ID_ASSERTION_MAX_AGE_SECONDS: '120',
    REDIS_PREFIX: stack().config.redisPrefix,
  });
  t.is(cfg.idAssertionMaxAgeSeconds, 120);
  const old = sign(subject, { issuedAt: now() - 100 });
  t.false((await verify(old)).ok);
  t.true((await verifyAppAssertion(cfg, stack().redis, old)).ok);
});

test('the nonce must carry the idaa_ prefix; the token must have exactly five non-empty fields', async (t) => {
  const subject = randomUUID();
  const bad = [
    sign(subject, { nonce: 'abcdefgh12345678' }),
    sign(subject, { nonce: 'IDAA_abcdefgh12345678' }),
    sign(subject).split('.').slice(0, 4).join('.'),
    `${sign(subject)}.extra`,
    sign(subject).replace(/\.[^.]+\.idaa_/, '..idaa_'),
    '',
    'idapp',
  ];
  for (const token of bad) {
    const r = await verify(token);
    t.false(r.ok, token);
    if (!r.ok) t.is(r.reason, 'malformed', token);
  }
  const missing = await verify(null);
  t.false(missing.ok);
});

test.serial(
  '(e) single use: a replay is refused, also on another api instance; failures do not burn the nonce',
  async (t) => {
    const s = stack();
    const subject = randomUUID();
    const nonce = `idaa_${randomUUID().replace(/-/g, '')}`;
    // A tampered attempt with this nonce fails and does not claim it.
    const genuine = sign(subject, { nonce });
    const tampered = genuine.slice(0, -1) + (genuine.endsWith('A') ? 'B' : 'A');
    t.false((await verify(tampered)).ok);
    const first = await verify(genuine);
    t.true(first.ok);
    const replay = await verify(genuine);
    t.false(replay.ok);
    if (!replay.ok) t.is(replay.reason, 'replayed');
    // The claim lives in Redis under the configured prefix with an expiry.
    const ttl = await s.redis.ttl(redisKey(s.config, 'idaa', nonce));
    t.true(ttl > 0 && ttl <= s.config.idAssertionMaxAgeSeconds + s.config.idAssertionClockSkewSeconds + 1);

    // Over HTTP on two api instances sharing Redis: the second presentation is refused.
    const user = await createUser(s.db);
    const second = await startSecondApi(s);
    try {
      const token = sign(user.id);
      const q = `client_id=${randomUUID()}&redirect_uri=${encodeURIComponent('https://app.example/cb')}&response_type=code&code_challenge=${'a'.repeat(43)}&code_challenge_method=S256`;
      const a = await fetch(`${s.url}/v1/oauth/authorize?${q}`, { headers: { 'x-id-app-assertion': token } });
      t.is(a.status, 400); // assertion accepted; the unknown client is what fails
      const b = await fetch(`${second.url}/v1/oauth/authorize?${q}`, { headers: { 'x-id-app-assertion': token } });
      t.is(b.status, 401);
      t.regex(((await b.json()) as { message: string }).message, /already used/);
    } finally {
      await second.close();
    }
  },
);

test('the authorize handoff answers 401 without or with a bad assertion', async (t) => {
  const s = stack();
  const q = `client_id=${randomUUID()}&redirect_uri=${encodeURIComponent('https://app.example/cb')}&response_type=code&code_challenge=${'a'.repeat(43)}&code_challenge_method=S256`;
  const none = await s.request('GET', `/v1/oauth/authorize?${q}`);
  t.is(none.status, 401);
  t.deepEqual(Object.keys(none.body).sort(), ['error', 'message']);
  const bad = await s.request('GET', `/v1/oauth/authorize?${q}`, {
    headers: { 'x-id-app-assertion': sign(randomUUID().toUpperCase()) },
  });
  t.is(bad.status, 401);
  t.regex(bad.body.message, /canonical/);
});

test('X-ID-App-Key matching finds the app and rejects anything else', (t) => {
  const cfg = stack().config;
  t.is(appForKey(cfg, ID_SECRET), 'idapp');
  t.is(appForKey(cfg, OTHER_SECRET), 'otherapp');
  t.is(appForKey(cfg, ID_SECRET + 'x'), null);
  t.is(appForKey(cfg, ''), null);
  t.is(appForKey(cfg, undefined), null);
});
