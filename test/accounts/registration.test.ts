import test from 'ava';
import { listenPushes } from '../helpers/pushes';
import { createUser } from '../helpers/factories';
import { tokenOf } from '../helpers/mailbox';
import { freshEmail, sentOutboxRow, useAccountsStack } from '../helpers/accounts';
import { eventually } from '../helpers/wait';

const { stack, mailbox } = useAccountsStack(test);

test('register → verification mail → register/verify creates a User-role user → login gives a working session', async (t) => {
  const s = stack();
  const email = freshEmail('reg');
  const r = await s.request('POST', '/v1/auth/register', {
    body: { email, password: 'correct horse battery', username: 'reg_user_1' },
  });
  t.is(r.status, 202, r.text);
  t.truthy(r.body.message);
  const mail = await mailbox().waitFor(email);
  t.regex(mail.text, /^https:\/\/app\.example\.test\/auth\/register\/verify\?token=/m);
  const token = tokenOf(mail);
  // Only the hash of the token is stored, and the sent mail's outbox row does not keep it either.
  const stored = await s.db('account_tokens').where({ purpose: 'registration', email }).first();
  t.not(stored.token_hash, token);
  t.false((await sentOutboxRow(s.db, email, 'registration')).includes(token));

  const v = await s.request('POST', '/v1/auth/register/verify', { body: { token } });
  t.is(v.status, 201, v.text);
  t.is(v.body.data.email, email);
  t.is(v.body.data.username, 'reg_user_1');
  t.is(v.body.data.platform, 'email');
  t.false(v.body.data.is_banned);
  t.deepEqual(Object.keys(v.body.data).sort(), [
    'avatar_url',
    'created_at',
    'email',
    'id',
    'is_banned',
    'last_login_at',
    'platform',
    'primary_platform_account_id',
    'privacy_mode',
    'updated_at',
    'username',
  ]);
  const roles = await s.db('user_roles').where('user_id', v.body.data.id).pluck('role_id');
  t.deepEqual(roles, ['role_user']);
  const account = await s.db('platform_accounts').where('user_id', v.body.data.id).first();
  t.regex(account.password_hash, /^\$argon2id\$/);

  // The token is single use.
  const again = await s.request('POST', '/v1/auth/register/verify', { body: { token } });
  t.is(again.status, 400);
  t.is(again.body.message, 'invalid or expired token');

  const login = await s.request('POST', '/v1/auth/login', {
    body: { email: email.toUpperCase(), password: 'correct horse battery' },
    headers: { 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0' },
  });
  t.is(login.status, 200, login.text);
  t.is(login.body.data.id, v.body.data.id);
  t.regex(login.body.session.sessionToken, /^sess_/);
  t.true(new Date(login.body.session.expires).getTime() > Date.now() + 29 * 86400_000);
  t.truthy(login.body.data.last_login_at);
  const me = await s.request('GET', '/v1/users/me', { token: login.body.session.sessionToken });
  t.is(me.status, 200);
  t.is(me.body.data.id, v.body.data.id);
  const session = await s.db('sessions').where('user_id', v.body.data.id).first();
  t.is(session.platform_slug, 'email');
  t.truthy(await s.db('audit_events').where({ user_id: v.body.data.id, event_type: 'login' }).first());
});

test('registering a taken address answers the same 202 and mails the owner instead', async (t) => {
  const s = stack();
  const owner = await createUser(s.db);
  const free = freshEmail('free');
  const a = await s.request('POST', '/v1/auth/register', { body: { email: owner.email, password: 'whatever123' } });
  const b = await s.request('POST', '/v1/auth/register', { body: { email: free, password: 'whatever123' } });
  t.is(a.status, 202);
  t.is(b.status, 202);
  t.deepEqual(a.body, b.body);
  const mail = await mailbox().waitFor(owner.email);
  t.is(mail.subject, 'You already have an account');
  t.notRegex(mail.text, /token=/);
  t.falsy(await s.db('account_tokens').where({ email: owner.email }).first());
  // Asking again within the minute: the same answer, but no second mail (no mailbox flooding).
  const again = await s.request('POST', '/v1/auth/register', { body: { email: owner.email, password: 'whatever123' } });
  t.is(again.status, 202);
  t.deepEqual(again.body, a.body);
  t.is((await s.db('email_outbox').where('to_address', owner.email)).length, 1);
});

test('German users get German mails; the locale of the registration is kept', async (t) => {
  const s = stack();
  const email = freshEmail('de');
  await s.request('POST', '/v1/auth/register', { body: { email, password: 'passwort123', locale: 'de' } });
  const mail = await mailbox().waitFor(email);
  t.is(mail.subject, 'Bestätige deine E-Mail-Adresse');
  t.regex(mail.text, /bitte bestätige/);
  const v = await s.request('POST', '/v1/auth/register/verify', { body: { token: tokenOf(mail) } });
  t.is(v.status, 201);
  const user = await s.db('users').where('id', v.body.data.id).first();
  t.is(user.preferred_locale, 'de');
  t.regex(user.username, /^de_/);

  const viaHeader = freshEmail('hdr');
  await s.request('POST', '/v1/auth/register', {
    body: { email: viaHeader, password: 'passwort123' },
    headers: { 'accept-language': 'de-AT,de;q=0.9' },
  });
  t.is((await mailbox().waitFor(viaHeader)).subject, 'Bestätige deine E-Mail-Adresse');
});

test('registration refusals: bad input 400, bad token 400', async (t) => {
  const s = stack();
  const short = await s.request('POST', '/v1/auth/register', { body: { email: freshEmail(), password: 'short' } });
  t.is(short.status, 400);
  t.regex(short.body.message, /^password/);
  const bad = await s.request('POST', '/v1/auth/register', { body: { email: 'not-an-email', password: 'longenough' } });
  t.is(bad.status, 400);
  t.regex(bad.body.message, /^email/);
  // RFC 5321's limits: such an address could never receive the mail, nor be stored as the account's id.
  for (const [email, message] of [
    [`${'a'.repeat(65)}@example.com`, /^email: must have at most 64 characters before the @/],
    [`${'a'.repeat(64)}@${'d'.repeat(180)}.example.com`, /^email: must be at most 254 characters/],
  ] as const) {
    const long = await s.request('POST', '/v1/auth/register', { body: { email, password: 'longenough' } });
    t.is(long.status, 400, email);
    t.regex(long.body.message, message);
  }
  const longest = `${'a'.repeat(64)}@${'d'.repeat(60)}.${'e'.repeat(59)}.${'f'.repeat(60)}.example`;
  t.is(longest.length, 254);
  t.is(
    (await s.request('POST', '/v1/auth/register', { body: { email: longest, password: 'longenough' } })).status,
    202,
  );
  const unknown = await s.request('POST', '/v1/auth/register/verify', { body: { token: 'x'.repeat(43) } });
  t.is(unknown.status, 400);
  // System key is allowed on register/verify (allowlist) but not on register.
  t.is(
    (await s.request('POST', '/v1/auth/register/verify', { token: s.systemKey, body: { token: 'y'.repeat(43) } }))
      .status,
    400,
  );
  t.is(
    (
      await s.request('POST', '/v1/auth/register', {
        token: s.systemKey,
        body: { email: freshEmail(), password: 'longenough' },
      })
    ).status,
    403,
  );
});

test('a taken username is not revealed at registration: same 202; the account gets the name with a suffix', async (t) => {
  const s = stack();
  // 24 characters: with the suffix the name is 30, the longest allowed.
  const taken = await createUser(s.db, { username: `Taken_${Date.now().toString(36)}${'x'.repeat(30)}`.slice(0, 24) });
  const takenEmail = freshEmail('tkn');
  const freeEmail = freshEmail('fre');
  const a = await s.request('POST', '/v1/auth/register', {
    body: { email: takenEmail, password: 'longenough', username: taken.username.toLowerCase() },
  });
  const b = await s.request('POST', '/v1/auth/register', {
    body: { email: freeEmail, password: 'longenough', username: `free_${Date.now().toString(36)}` },
  });
  t.is(a.status, 202, a.text);
  t.is(b.status, 202, b.text);
  t.deepEqual(a.body, b.body);

  const v = await s.request('POST', '/v1/auth/register/verify', {
    body: { token: tokenOf(await mailbox().waitFor(takenEmail)) },
  });
  t.is(v.status, 201, v.text);
  t.regex(v.body.data.username, new RegExp(`^${taken.username.toLowerCase().slice(0, 23)}_[0-9a-f]{6}$`));
  t.is(v.body.data.email, takenEmail);
  // The owner of the name keeps it.
  t.is((await s.db('users').where('id', taken.id).first()).username, taken.username);

  // Free at registration, taken before the link is used: the same outcome.
  const late = `late_${Date.now().toString(36)}`;
  const lateEmail = freshEmail('late');
  await s.request('POST', '/v1/auth/register', { body: { email: lateEmail, password: 'longenough', username: late } });
  await createUser(s.db, { username: late });
  const lv = await s.request('POST', '/v1/auth/register/verify', {
    body: { token: tokenOf(await mailbox().waitFor(lateEmail)) },
  });
  t.is(lv.status, 201, lv.text);
  t.regex(lv.body.data.username, new RegExp(`^${late}_[0-9a-f]{6}$`));
  t.is((await s.request('POST', '/v1/auth/login', { body: { email: lateEmail, password: 'longenough' } })).status, 200);
});

test('expired registration tokens are refused', async (t) => {
  const s = stack();
  const email = freshEmail('exp');
  await s.request('POST', '/v1/auth/register', { body: { email, password: 'longenough1' } });
  const token = tokenOf(await mailbox().waitFor(email));
  await s
    .db('account_tokens')
    .where({ email, purpose: 'registration' })
    .update({ expires_at: new Date(Date.now() - 1000) });
  t.is((await s.request('POST', '/v1/auth/register/verify', { body: { token } })).status, 400);
});

test('wrong password and unknown email get the same 401, each writing login_failed', async (t) => {
  const s = stack();
  const email = freshEmail('lf');
  await s.request('POST', '/v1/auth/register', { body: { email, password: 'the-right-one' } });
  const v = await s.request('POST', '/v1/auth/register/verify', {
    body: { token: tokenOf(await mailbox().waitFor(email)) },
  });
  const wrong = await s.request('POST', '/v1/auth/login', { body: { email, password: 'the-wrong-one' } });
  const unknown = await s.request('POST', '/v1/auth/login', {
    body: { email: freshEmail('nobody'), password: 'the-wrong-one' },
  });
  t.is(wrong.status, 401);
  t.is(unknown.status, 401);
  t.deepEqual(wrong.body, unknown.body);
  // login_failed goes through the buffered audit writer: it lands moments after the answer.
  const failed = await eventually(async () => {
    const rows = await s.db('audit_events').where({ event_type: 'login_failed' }).orderBy('created_at');
    return rows.length >= 2 ? rows : undefined;
  });
  t.true(
    failed.some(
      (e) => e.user_id === v.body.data.id && e.status === 'failure' && e.metadata.reason === 'wrong_password',
    ),
  );
  t.true(
    failed.some(
      (e) => e.user_id === null && e.metadata.reason === 'unknown_account' && !JSON.stringify(e).includes('nobody'),
    ),
  );
});

test('verify-email: an unverified email account is refused at login, gets a mail, and signs in after verifying', async (t) => {
  const s = stack();
  const email = freshEmail('unv');
  await s.request('POST', '/v1/auth/register', { body: { email, password: 'longenough1' } });
  const v = await s.request('POST', '/v1/auth/register/verify', {
    body: { token: tokenOf(await mailbox().waitFor(email)) },
  });
  await s.db('platform_accounts').where('user_id', v.body.data.id).update({ email_verified_at: null });
  const refused = await s.request('POST', '/v1/auth/login', { body: { email, password: 'longenough1' } });
  t.is(refused.status, 403);
  t.regex(refused.body.message, /not verified/);
  const mail = await mailbox().waitFor(email, (m) => m.subject === 'Verify your email address');
  t.regex(mail.text, /\/auth\/verify-email\?token=/);
  t.false((await sentOutboxRow(s.db, email, 'email_verification')).includes(tokenOf(mail)));
  const ok = await s.request('POST', '/v1/auth/verify-email', { token: s.systemKey, body: { token: tokenOf(mail) } });
  t.is(ok.status, 200, ok.text);
  t.deepEqual(ok.body, { success: true, message: 'your email address is verified' });
  t.is((await s.request('POST', '/v1/auth/verify-email', { body: { token: tokenOf(mail) } })).status, 400);
  t.is((await s.request('POST', '/v1/auth/login', { body: { email, password: 'longenough1' } })).status, 200);
});

test('password reset: 202 for any address, mail with token, confirm revokes every session and pushes forceLogout', async (t) => {
  const s = stack();
  const email = freshEmail('rst');
  await s.request('POST', '/v1/auth/register', { body: { email, password: 'old-password-1' } });
  const v = await s.request('POST', '/v1/auth/register/verify', {
    body: { token: tokenOf(await mailbox().waitFor(email)) },
  });
  const userId = v.body.data.id;
  const l1 = await s.request('POST', '/v1/auth/login', { body: { email, password: 'old-password-1' } });
  const l2 = await s.request('POST', '/v1/auth/login', { body: { email, password: 'old-password-1' } });

  const unknown = await s.request('POST', '/v1/auth/reset-password/request', { body: { email: freshEmail('ghost') } });
  const known = await s.request('POST', '/v1/auth/reset-password/request', { token: s.systemKey, body: { email } });
  t.is(unknown.status, 202);
  t.is(known.status, 202);
  t.deepEqual(unknown.body, known.body);
  const mail = await mailbox().waitFor(email, (m) => m.subject === 'Reset your password');
  t.regex(mail.text, /^https:\/\/app\.example\.test\/auth\/reset-password\?token=/m);
  t.false((await sentOutboxRow(s.db, email, 'password_reset')).includes(tokenOf(mail)));
  t.truthy(await s.db('audit_events').where({ user_id: userId, event_type: 'password_reset_requested' }).first());
  t.is((await s.request('POST', '/v1/auth/reset-password/request', { body: { email } })).status, 202);
  t.is((await s.db('email_outbox').where({ to_address: email, template: 'password_reset' })).length, 1);

  const pushes = await listenPushes(s.redis, s.config, `user:${userId}`);
  try {
    const shortPw = await s.request('POST', '/v1/auth/reset-password/confirm', {
      body: { token: tokenOf(mail), password: 'short' },
    });
    t.is(shortPw.status, 400);
    const c = await s.request('POST', '/v1/auth/reset-password/confirm', {
      body: { token: tokenOf(mail), password: 'new-password-2' },
    });
    t.is(c.status, 200, c.text);
    t.true(c.body.success);
    const force = await pushes.waitFor((m) => m.type === 'forceLogout');
    t.is(force.userId, userId);
    t.is(force.reason, 'password_reset');
    t.truthy(force.timestamp);
    await pushes.waitFor((m) => m.type === 'sessionRevoked' && m.sessionId);
  } finally {
    pushes.close();
  }
  t.is((await s.db('sessions').where('user_id', userId).count('* as n').first())!.n, 0);
  await new Promise((r) => setTimeout(r, 50));
  t.is((await s.request('GET', '/v1/users/me', { token: l1.body.session.sessionToken })).status, 401);
  t.is((await s.request('GET', '/v1/users/me', { token: l2.body.session.sessionToken })).status, 401);
  t.is((await s.request('POST', '/v1/auth/login', { body: { email, password: 'old-password-1' } })).status, 401);
  t.is((await s.request('POST', '/v1/auth/login', { body: { email, password: 'new-password-2' } })).status, 200);
  t.is(
    (
      await s.request('POST', '/v1/auth/reset-password/confirm', {
        body: { token: tokenOf(mail), password: 'another-pass-3' },
      })
    ).status,
    400,
  );
  t.truthy(await s.db('audit_events').where({ user_id: userId, event_type: 'password_changed' }).first());
});

/** The median of a list of numbers. */
function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

// Serial: timing is compared, so the file's other tests do not run meanwhile.
test.serial(
  'password reset request: known and unknown addresses get the same answer in the same time; the known one still gets the mail',
  async (t) => {
    const s = stack();
    const rounds = 20;
    const timed = async (email: string) => {
      const started = process.hrtime.bigint();
      const r = await s.request('POST', '/v1/auth/reset-password/request', { body: { email } });
      return { r, ms: Number(process.hrtime.bigint() - started) / 1e6 };
    };
    // In production the workers run in their own processes; here they share the api's, so the reset jobs wait while timing.
    const worker = s.workers!.workers.find((w) => w.name === 'passwordResets')!;
    const allKnown: Array<{ id: string; email: string }> = [];
    const allUnknown: string[] = [];
    /** One measurement: `rounds` pairs of a known and an unknown address, each address new (a repeated one is answered from its mail slot). */
    const measure = async () => {
      const known = await Promise.all(Array.from({ length: rounds }, () => createUser(s.db)));
      const unknown = Array.from({ length: rounds }, () => freshEmail('ghost'));
      allKnown.push(...known);
      allUnknown.push(...unknown);
      const knownMs: number[] = [];
      const unknownMs: number[] = [];
      await worker.pause(true);
      try {
        await timed(freshEmail('warmup'));
        for (let i = 0; i < rounds; i++) {
          // Alternating, and in turn which goes first, so a noisy neighbour slows both kinds alike.
          const knownFirst = i % 2 === 0;
          const first = await timed(knownFirst ? known[i].email : unknown[i]);
          const second = await timed(knownFirst ? unknown[i] : known[i].email);
          const [a, b] = knownFirst ? [first, second] : [second, first];
          t.is(a.r.status, 202);
          t.is(b.r.status, 202);
          t.deepEqual(a.r.body, b.r.body);
          knownMs.push(a.ms);
          unknownMs.push(b.ms);
        }
      } finally {
        worker.resume();
      }
      // Paired: the median of (known - unknown) within each round, so a slow moment weighs on both sides.
      const diff = median(knownMs.map((k, i) => k - unknownMs[i]));
      // The bound grows with the machine's load: a third of the unknown address's median, 5 ms at least.
      const bound = Math.max(5, median(unknownMs) / 3);
      t.log(
        `median known ${median(knownMs).toFixed(2)} ms, unknown ${median(unknownMs).toFixed(2)} ms, of the differences ${diff.toFixed(2)} ms (bound ${bound.toFixed(2)} ms)`,
      );
      return { diff, bound };
    };
    // Single requests on a shared 2-core machine vary by 100 ms and more, and under the whole suite's load a request
    // takes 15-30 ms instead of 6: a real leak (14 vs 3 ms before the fix, over four times the time) shows in every
    // measurement, noise rarely in three in a row.
    let m = await measure();
    for (let attempt = 1; attempt < 3 && m.diff >= m.bound; attempt++) m = await measure();
    t.true(m.diff < m.bound, `median difference ${m.diff.toFixed(2)} ms, bound ${m.bound.toFixed(2)} ms`);

    // The work was not skipped: every known address gets its reset mail, and the audit event exists.
    for (const u of allKnown) {
      const mail = await mailbox().waitFor(u.email, (m) => m.subject === 'Reset your password');
      t.truthy(tokenOf(mail));
    }
    const audited = await s
      .db('audit_events')
      .where({ event_type: 'password_reset_requested' })
      .whereIn(
        'user_id',
        allKnown.map((u) => u.id),
      )
      .pluck('user_id');
    t.is(new Set(audited).size, allKnown.length);
    t.falsy(await s.db('email_outbox').whereIn('to_address', allUnknown).first());
  },
);

test.serial('a disabled email platform refuses registration and login; other platforms keep working', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const email = freshEmail('dis');
  await s.request('POST', '/v1/auth/register', { body: { email, password: 'longenough1' } });
  await s.request('POST', '/v1/auth/register/verify', { body: { token: tokenOf(await mailbox().waitFor(email)) } });
  t.is(
    (await s.request('PATCH', '/v1/platforms/email/enabled', { token: admin.token, body: { enabled: false } })).status,
    200,
  );
  try {
    const reg = await s.request('POST', '/v1/auth/register', {
      body: { email: freshEmail(), password: 'longenough1' },
    });
    t.is(reg.status, 403);
    const login = await s.request('POST', '/v1/auth/login', { body: { email, password: 'longenough1' } });
    t.is(login.status, 403);
    t.regex(login.body.message, /disabled/);
    const oauth = await s.request('POST', '/v1/users/oauth', {
      token: s.systemKey,
      body: { email: freshEmail(), name: 'Still Fine', oauthProvider: 'github', oauthProviderId: `gh-${Date.now()}` },
    });
    t.is(oauth.status, 200);
  } finally {
    await s.request('PATCH', '/v1/platforms/email/enabled', { token: admin.token, body: { enabled: true } });
  }
});
