import test from 'ava';
import { setClockOffset } from '../../shared/clock';
import { hashPassword } from '../../shared/domain/passwords';
import { hashBackupCode, legacyBackupCodeHash } from '../../shared/domain/totp';
import { TWO_FACTOR_THROTTLE } from '../../shared/caches/twoFactorThrottle';
import { passwordResetToken, useAccountsStack } from '../helpers/accounts';
import { createUser, TestUser } from '../helpers/factories';
import { startSecondApi } from '../helpers/secondApi';
import { lockWaiters } from '../helpers/wait';
import { codeNow, enableTwoFactor, nextStep } from './helpers';

// Serial: the tests move the service's clock, and a second api instance rebinds the models.
// A pool of 10: one test holds a row lock while six code checks each count in the database and then
// wait for the row (the default 5 would leave the sixth check no connection to count with).
const { stack } = useAccountsStack(test, { DATABASE_POOL_MAX: '10' });
test.after.always(() => setClockOffset(0));
// Every request comes from 127.0.0.1: wrong codes of one test must not use up the IP allowance of the next.
test.beforeEach(async () => {
  const s = stack();
  await s.db('attempt_counters').where('key', 'like', 'login:ip:%').delete();
});

const PASSWORD = 'correct horse battery';

async function userWithPassword(): Promise<TestUser> {
  const s = stack();
  const u = await createUser(s.db);
  await s
    .db('platform_accounts')
    .where('user_id', u.id)
    .update({ password_hash: await hashPassword(PASSWORD) });
  return u;
}

/** Signs `u` in with the password: the 2FA challenge token the answer carries. */
async function challengeFor(u: TestUser): Promise<string> {
  return (await stack().request('POST', '/v1/auth/login', { body: { email: u.email, password: PASSWORD } })).body
    .challenge_token;
}

async function post(url: string, path: string, body: unknown) {
  const r = await fetch(url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as any, headers: r.headers };
}

test.serial('with 2FA on, login answers the challenge and no session; 2fa/check finishes it', async (t) => {
  const s = stack();
  const u = await userWithPassword();
  const plain = await s.request('POST', '/v1/auth/login', { body: { email: u.email, password: PASSWORD } });
  t.truthy(plain.body.session?.sessionToken, 'no 2FA: a session at once');

  const { secret } = await enableTwoFactor(s, u.token);
  const login = await s.request('POST', '/v1/auth/login', { body: { email: u.email, password: PASSWORD } });
  t.is(login.status, 200);
  t.deepEqual(Object.keys(login.body).sort(), ['challenge_token', 'expires_at', 'requires_two_factor']);
  t.true(login.body.requires_two_factor);
  t.true(Date.parse(login.body.expires_at) > Date.now());

  const wrong = await s.request('POST', '/v1/auth/2fa/check', {
    body: { challenge_token: login.body.challenge_token, code: codeNow(secret) === '000000' ? '999999' : '000000' },
  });
  t.is(wrong.status, 400);
  t.is(wrong.body.message, 'code: invalid code');
  const forged = await s.request('POST', '/v1/auth/2fa/check', {
    body: { challenge_token: 'tfc_' + Buffer.from('v2:00000000:AAAA').toString('base64url'), code: codeNow(secret) },
  });
  t.is(forged.status, 400);
  t.regex(forged.body.message, /challenge_token/);

  const ok = await s.request('POST', '/v1/auth/2fa/check', {
    body: { challenge_token: login.body.challenge_token, code: codeNow(secret) },
  });
  t.is(ok.status, 200, ok.text);
  t.is(ok.body.data.id, u.id);
  t.truthy(ok.body.session.sessionToken);
  const me = await s.request('GET', '/v1/users/me', { token: ok.body.session.sessionToken });
  t.is(me.status, 200);

  nextStep();
  const reused = await s.request('POST', '/v1/auth/2fa/check', {
    body: { challenge_token: login.body.challenge_token, code: codeNow(secret) },
  });
  t.is(reused.status, 400, 'a challenge finishes one sign-in');

  const events = await s.db('audit_events').where('user_id', u.id).pluck('event_type');
  t.true(events.includes('2fa_verified'));
  t.true(events.includes('login'));
  const failed = await s.db('audit_events').where({ user_id: u.id, event_type: 'login_failed' });
  t.is(failed.length, 1);
  t.is(failed[0].metadata.reason, 'wrong_2fa_code');
});

test.serial(
  'a challenge issued before a password reset, a deletion or a disabled platform opens no session and spends no code',
  async (t) => {
    const s = stack();
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    const check = (challenge_token: string, code: string) =>
      s.request('POST', '/v1/auth/2fa/check', { body: { challenge_token, code } });
    const unusedCodes = async (userId: string) =>
      (await s.db('two_factor_backup_codes').where({ user_id: userId }).whereNull('used_at').count({ n: '*' }))[0].n;

    // Password reset: the reset ends every sign-in, also one halfway through.
    const reset = await userWithPassword();
    const resetCodes = (await enableTwoFactor(s, reset.token)).backupCodes;
    const beforeReset = await challengeFor(reset);
    const token = await passwordResetToken(s.db, reset);
    const confirmed = await s.request('POST', '/v1/auth/reset-password/confirm', {
      body: { token, password: 'brand-new-pass-1' },
    });
    t.is(confirmed.status, 200, confirmed.text);
    const unused = await unusedCodes(reset.id);
    const afterReset = await check(beforeReset, resetCodes[0]);
    t.is(afterReset.status, 400, afterReset.text);
    t.regex(afterReset.body.message, /challenge_token/);
    t.is(await unusedCodes(reset.id), unused, 'the backup code stays unused');

    // Deletion: no session for a deleted account (it would come back to life on cancel-deletion).
    const deleted = await userWithPassword();
    const { secret } = await enableTwoFactor(s, deleted.token);
    const beforeDelete = await challengeFor(deleted);
    t.is((await s.request('DELETE', `/v1/users/${deleted.id}`, { token: admin.token })).status, 204);
    const afterDelete = await check(beforeDelete, codeNow(secret));
    t.is(afterDelete.status, 400, afterDelete.text);
    t.is(
      await s
        .db('sessions')
        .where({ user_id: deleted.id })
        .count({ n: '*' })
        .first()
        .then((r) => Number(r!.n)),
      0,
    );

    // The email platform switched off: answered as the sign-in itself is now (403).
    const off = await userWithPassword();
    const offSecret = (await enableTwoFactor(s, off.token)).secret;
    const beforeOff = await challengeFor(off);
    const sessionsBefore = await s.db('sessions').where({ user_id: off.id }).pluck('id');
    t.is(
      (await s.request('PATCH', '/v1/platforms/email/enabled', { token: admin.token, body: { enabled: false } }))
        .status,
      200,
    );
    try {
      const afterOff = await check(beforeOff, codeNow(offSecret));
      t.is(afterOff.status, 403, afterOff.text);
      t.deepEqual(await s.db('sessions').where({ user_id: off.id }).pluck('id'), sessionsBefore);
    } finally {
      await s.request('PATCH', '/v1/platforms/email/enabled', { token: admin.token, body: { enabled: true } });
    }
    // Back on, the same challenge still works: nothing above spent it.
    nextStep();
    const ok = await check(beforeOff, codeNow(offSecret));
    t.is(ok.status, 200, ok.text);
  },
);

test.serial('a backup code signs in once', async (t) => {
  const s = stack();
  const u = await userWithPassword();
  const { backupCodes } = await enableTwoFactor(s, u.token);
  const challenge = async () => await challengeFor(u);
  const first = await s.request('POST', '/v1/auth/2fa/check', {
    body: { challenge_token: await challenge(), code: backupCodes[0] },
  });
  t.is(first.status, 200, first.text);
  const second = await s.request('POST', '/v1/auth/2fa/check', {
    body: { challenge_token: await challenge(), code: backupCodes[0] },
  });
  t.is(second.status, 400);
  const status = await s.request('GET', '/v1/users/me/2fa/status', { token: u.token });
  t.is(status.body.backup_codes_remaining, 9);
});

test.serial(
  'backup codes are stored salted and slow; a code stored the old unsalted way still signs in once',
  async (t) => {
    const s = stack();
    const a = await userWithPassword();
    const b = await userWithPassword();
    const { backupCodes } = await enableTwoFactor(s, a.token);
    await enableTwoFactor(s, b.token);
    const norm = (c: string) => c.replace('-', '');
    const stored = await s.db('two_factor_backup_codes').where('user_id', a.id).pluck('code_hash');
    // Not the fast unsalted hash a leaked table gives away by trying all 31^8 codes.
    for (const c of backupCodes) t.false(stored.includes(legacyBackupCodeHash(norm(c))));
    // Salted with the owner: one code hashes differently for another user.
    t.not(await hashBackupCode(b.id, norm(backupCodes[0])), await hashBackupCode(a.id, norm(backupCodes[0])));
    t.true(stored.includes(await hashBackupCode(a.id, norm(backupCodes[0]))));

    // A code issued before the change (SHA-256) keeps working, once.
    const legacy = 'hjkm-2345';
    await s.db('two_factor_backup_codes').insert({ user_id: a.id, code_hash: legacyBackupCodeHash(norm(legacy)) });
    const challenge = async () => await challengeFor(a);
    const first = await s.request('POST', '/v1/auth/2fa/check', {
      body: { challenge_token: await challenge(), code: legacy },
    });
    t.is(first.status, 200, first.text);
    const again = await s.request('POST', '/v1/auth/2fa/check', {
      body: { challenge_token: await challenge(), code: legacy },
    });
    t.is(again.status, 400);
  },
);

test.serial('a code is accepted once across two api instances, also when both get it at the same time', async (t) => {
  const s = stack();
  const u = await userWithPassword();
  const { secret } = await enableTwoFactor(s, u.token);
  const second = await startSecondApi(s);
  try {
    const c1 = await post(s.url, '/v1/auth/login', { email: u.email, password: PASSWORD });
    const c2 = await post(second.url, '/v1/auth/login', { email: u.email, password: PASSWORD });
    const code = codeNow(secret);
    const [a, b] = await Promise.all([
      post(s.url, '/v1/auth/2fa/check', { challenge_token: c1.body.challenge_token, code }),
      post(second.url, '/v1/auth/2fa/check', { challenge_token: c2.body.challenge_token, code }),
    ]);
    t.deepEqual([a.status, b.status].sort(), [200, 400]);
    // And one after the other: the other instance refuses the code the first accepted.
    nextStep();
    const code2 = codeNow(secret);
    const c3 = await post(s.url, '/v1/auth/login', { email: u.email, password: PASSWORD });
    const c4 = await post(second.url, '/v1/auth/login', { email: u.email, password: PASSWORD });
    t.is(
      (await post(s.url, '/v1/auth/2fa/check', { challenge_token: c3.body.challenge_token, code: code2 })).status,
      200,
    );
    const replay = await post(second.url, '/v1/auth/2fa/check', {
      challenge_token: c4.body.challenge_token,
      code: code2,
    });
    t.is(replay.status, 400);
    t.is(replay.body.message, 'code: invalid code');
  } finally {
    await second.close();
  }
});

test.serial('20 parallel wrong guesses: exactly 5 are checked, the rest 429 with a cool-down that grows', async (t) => {
  const s = stack();
  const u = await userWithPassword();
  const { secret } = await enableTwoFactor(s, u.token);
  const challenge = await challengeFor(u);
  const right = codeNow(secret);
  const guesses = Array.from({ length: 20 }, (_, i) => String(100000 + i * 7919)).filter((c) => c !== right);
  const answers = await Promise.all(
    guesses.map((code) => s.request('POST', '/v1/auth/2fa/check', { body: { challenge_token: challenge, code } })),
  );
  const statuses = answers.map((a) => a.status);
  t.is(statuses.filter((x) => x === 400).length, TWO_FACTOR_THROTTLE.maxFailures, statuses.join(','));
  t.is(statuses.filter((x) => x === 429).length, guesses.length - TWO_FACTOR_THROTTLE.maxFailures);
  const limited = answers.find((a) => a.status === 429)!;
  const firstCooldown = Number(limited.headers.get('retry-after'));
  t.true(firstCooldown > 0 && firstCooldown <= TWO_FACTOR_THROTTLE.baseCooldownSeconds, String(firstCooldown));
  const wrongCodes = await s.db('audit_events').where({ user_id: u.id, event_type: 'login_failed' });
  t.is(wrongCodes.filter((e) => e.metadata.reason === 'wrong_2fa_code').length, TWO_FACTOR_THROTTLE.maxFailures);

  // During the cool-down even the right code, on any 2FA endpoint, answers 429.
  const blocked = await s.request('POST', '/v1/auth/2fa/check', { body: { challenge_token: challenge, code: right } });
  t.is(blocked.status, 429);
  const regen = await s.request('POST', '/v1/users/me/2fa/backup-codes/regenerate', {
    token: u.token,
    body: { code: right },
  });
  t.is(regen.status, 429);
  t.truthy(regen.headers.get('retry-after'));
  // Spec §8's headers describe the lock-out, not the general tier the session still has room in.
  t.is(regen.headers.get('x-ratelimit-remaining'), '0');
  t.is(regen.headers.get('x-ratelimit-limit'), String(TWO_FACTOR_THROTTLE.maxFailures));

  // The cool-down ends; 5 more wrong codes give a longer one.
  const counter = () => s.db('attempt_counters').where('key', `2fa:${u.id}`);
  await counter().update({ locked_until: null });
  for (let i = 0; i < TWO_FACTOR_THROTTLE.maxFailures; i++) {
    const r = await s.request('POST', '/v1/auth/2fa/check', { body: { challenge_token: challenge, code: guesses[i] } });
    t.is(r.status, 400);
  }
  const again = await s.request('POST', '/v1/auth/2fa/check', { body: { challenge_token: challenge, code: right } });
  t.is(again.status, 429);
  t.true(
    Number(again.headers.get('retry-after')) > TWO_FACTOR_THROTTLE.baseCooldownSeconds,
    again.headers.get('retry-after')!,
  );

  // After the cool-down the right code works and the count starts over.
  await counter().update({ locked_until: null });
  const done = await s.request('POST', '/v1/auth/2fa/check', { body: { challenge_token: challenge, code: right } });
  t.is(done.status, 200, done.text);
  t.falsy(await counter().first(), 'count, lock and level start over');
});

test.serial('a spent challenge spends no code: a second backup code sent with it stays unused', async (t) => {
  const s = stack();
  const u = await userWithPassword();
  const { backupCodes } = await enableTwoFactor(s, u.token);
  const challenge = await challengeFor(u);
  const unused = async () =>
    Number((await s.db('two_factor_backup_codes').where('user_id', u.id).whereNull('used_at').count({ n: '*' }))[0].n);
  const first = await s.request('POST', '/v1/auth/2fa/check', {
    body: { challenge_token: challenge, code: backupCodes[0] },
  });
  t.is(first.status, 200, first.text);
  t.is(await unused(), backupCodes.length - 1);
  const replay = await s.request('POST', '/v1/auth/2fa/check', {
    body: { challenge_token: challenge, code: backupCodes[1] },
  });
  t.is(replay.status, 400);
  t.regex(replay.body.message, /^challenge_token: /);
  // Other spellings of the same token (base64 decoding skips stray characters, in the token and in
  // the sealed value inside it) are the same spent challenge.
  const body = challenge.slice('tfc_'.length);
  const inner = Buffer.from(body, 'base64url').toString('utf8');
  const spellings = [
    `tfc_${body.slice(0, 10)}.${body.slice(10)}`,
    `tfc_${body}A`,
    `tfc_${Buffer.from(`${inner.slice(0, 20)}.${inner.slice(20)}`).toString('base64url')}`,
  ];
  for (const spelling of spellings) {
    const again = await s.request('POST', '/v1/auth/2fa/check', {
      body: { challenge_token: spelling, code: backupCodes[1] },
    });
    t.is(again.status, 400, `${spelling}: ${again.text}`);
    t.regex(again.body.message, /^challenge_token: /);
  }
  // Refused before the code was checked: still unused, and usable with a fresh challenge.
  t.is(await unused(), backupCodes.length - 1);
  const fresh = await challengeFor(u);
  const second = await s.request('POST', '/v1/auth/2fa/check', {
    body: { challenge_token: fresh, code: backupCodes[1] },
  });
  t.is(second.status, 200, second.text);
});

test.serial('parallel backup codes on one challenge: one signs in, the others stay unused', async (t) => {
  const s = stack();
  const u = await userWithPassword();
  const { backupCodes } = await enableTwoFactor(s, u.token);
  const challenge = await challengeFor(u);
  // Three checks with three different right codes, lined up behind the 2FA row lock so that all
  // of them have passed the spent-challenge check before any commits.
  const trx = await s.db.transaction();
  let answers: { status: number; body: any }[];
  try {
    await trx('user_two_factor').where('user_id', u.id).forUpdate();
    const pending = Promise.all(
      backupCodes
        .slice(0, 3)
        .map((code) => s.request('POST', '/v1/auth/2fa/check', { body: { challenge_token: challenge, code } })),
    );
    await lockWaiters(s.db, 3);
    await trx.commit();
    answers = await pending;
  } finally {
    if (!trx.isCompleted()) await trx.rollback();
  }
  t.deepEqual(answers.map((a) => a.status).sort(), [200, 400, 400]);
  for (const a of answers.filter((a) => a.status === 400)) t.regex(a.body.message, /^challenge_token: /);
  const used = await s.db('two_factor_backup_codes').where('user_id', u.id).whereNotNull('used_at');
  t.is(used.length, 1, 'only the code that signed in is spent');
  t.falsy(await s.db('attempt_counters').where('key', `2fa:${u.id}`).first(), 'no lost race counted as a guess');
});

test.serial('parallel requests with the right code never lock the account out', async (t) => {
  const s = stack();
  const u = await userWithPassword();
  const setup = await s.request('POST', '/v1/users/me/2fa/setup', { token: u.token, body: {} });
  t.is(setup.status, 200, setup.text);
  nextStep();
  const locked = async () =>
    !!(await s.db('attempt_counters').where('key', `2fa:${u.id}`).where('locked_until', '>', s.db.fn.now()).first());
  // The same right code six times at once. The 2FA row is held locked until every request has
  // counted its check, so the sixth finds the count full and sets a lock-out, as in a real race;
  // then one request enables 2FA and the others find it enabled (no guess).
  const trx = await s.db.transaction();
  let statuses: number[];
  try {
    await trx('user_two_factor').where('user_id', u.id).forUpdate();
    const pending = Promise.all(
      Array.from({ length: TWO_FACTOR_THROTTLE.maxFailures + 1 }, () =>
        s.request('POST', '/v1/users/me/2fa/verify', { token: u.token, body: { code: codeNow(setup.body.secret) } }),
      ),
    );
    // Up to 10 s: on a loaded machine six requests take a while to reach the locked row.
    for (let i = 0; i < 1000 && !(await locked()); i++) await new Promise((r) => setTimeout(r, 10));
    t.true(await locked(), 'the sixth check set a lock-out');
    await trx.commit();
    statuses = (await pending).map((a) => a.status).sort();
  } finally {
    // A failed assertion throws: the row lock goes with it, or the requests (and the test run) wait forever.
    if (!trx.isCompleted()) await trx.rollback();
  }
  t.deepEqual(statuses, [200, 400, 400, 400, 400, 429]);
  nextStep();
  // No wrong code was ever sent: the right code lifted the lock, and the next one is checked.
  const regen = await s.request('POST', '/v1/users/me/2fa/backup-codes/regenerate', {
    token: u.token,
    body: { code: codeNow(setup.body.secret) },
  });
  t.is(regen.status, 200, regen.text);
  t.falsy(await s.db('attempt_counters').where('key', `2fa:${u.id}`).first(), 'no lock, no count');
});
