import test from 'ava';
import jsQR from 'jsqr';
import { PNG } from 'pngjs';
import { setClockOffset } from '../../shared/clock';
import * as totp from '../../shared/domain/totp';
import { useAccountsStack } from '../helpers/accounts';
import { createUser } from '../helpers/factories';
import { advanceClock, codeNow, enableTwoFactor, nextStep } from './helpers';

// Serial: the tests move the service's clock.
const { stack, mailbox } = useAccountsStack(test);
test.after.always(() => setClockOffset(0));

test.serial('setup answers a base32 secret, an otpauth URI and a QR PNG that decodes to the URI', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const r = await s.request('POST', '/v1/users/me/2fa/setup', { token: u.token, body: {} });
  t.is(r.status, 200, r.text);
  t.regex(r.body.secret, /^[A-Z2-7]{32}$/);
  t.is(r.body.platform_slug, 'email');
  const uri = new URL(r.body.qr_code_url);
  t.is(uri.protocol, 'otpauth:');
  t.is(uri.host, 'totp');
  t.is(uri.searchParams.get('secret'), r.body.secret);
  t.is(uri.searchParams.get('issuer'), 'Service');
  t.is(decodeURIComponent(uri.pathname), `/Service:${u.email}`);
  const expires = Date.parse(r.body.expires_at) - Date.now();
  t.true(expires > 9 * 60_000 && expires <= 10 * 60_000 + 60_000, String(expires));

  t.true(r.body.qr_code_image.startsWith('data:image/png;base64,'));
  const png = PNG.sync.read(Buffer.from(r.body.qr_code_image.slice('data:image/png;base64,'.length), 'base64'));
  const qr = jsQR(new Uint8ClampedArray(png.data), png.width, png.height);
  t.is(qr?.data, r.body.qr_code_url);
});

test.serial(
  'setup: 400 naming platform_id for an unknown platform or one without 2FA support; a chosen platform is kept',
  async (t) => {
    const s = stack();
    const u = await createUser(s.db);
    const unknown = await s.request('POST', '/v1/users/me/2fa/setup', {
      token: u.token,
      body: { platform_id: '00000000-0000-4000-8000-000000000000' },
    });
    t.is(unknown.status, 400);
    t.is(unknown.body.message, 'platform_id: no such platform');
    const google = await s.db('platforms').where('slug', 'google').first('id');
    const unsupported = await s.request('POST', '/v1/users/me/2fa/setup', {
      token: u.token,
      body: { platform_id: google.id },
    });
    t.is(unsupported.status, 400);
    t.regex(unsupported.body.message, /^platform_id: .*does not support two-factor/);
    const chat = await s.db('platforms').where('slug', 'chat').first('id');
    const ok = await s.request('POST', '/v1/users/me/2fa/setup', { token: u.token, body: { platform_id: chat.id } });
    t.is(ok.status, 200);
    t.is(ok.body.platform_slug, 'chat');
    const bad = await s.request('POST', '/v1/users/me/2fa/setup', { token: u.token, body: { user_id: 'nope' } });
    t.is(bad.status, 400);
    t.regex(bad.body.message, /user_id/);
  },
);

test.serial(
  'every transition: disabled → pending → enabled → (regenerate) → disabled, with mails and audit',
  async (t) => {
    const s = stack();
    const u = await createUser(s.db);
    const status = async () => (await s.request('GET', '/v1/users/me/2fa/status', { token: u.token })).body;
    t.deepEqual(await status(), {
      enabled: false,
      enabled_at: null,
      setup_platform: null,
      platform_slug: null,
      backup_codes_remaining: 0,
    });
    // Nothing pending: verify is refused.
    const none = await s.request('POST', '/v1/users/me/2fa/verify', { token: u.token, body: { code: '123456' } });
    t.is(none.status, 400);
    t.regex(none.body.message, /no pending/);

    const setup = await s.request('POST', '/v1/users/me/2fa/setup', { token: u.token, body: {} });
    const secret: string = setup.body.secret;
    t.false((await status()).enabled, 'pending is not enabled');

    // The stored secret is sealed: not the secret, and in the key-id format.
    const row = await s.db('user_two_factor').where('user_id', u.id).first();
    t.false(row.secret_encrypted.includes(secret));
    t.regex(row.secret_encrypted, /^v2:[0-9a-f]{8}:/);

    const wrong = await s.request('POST', '/v1/users/me/2fa/verify', {
      token: u.token,
      body: { code: codeNow(secret) === '000000' ? '111111' : '000000' },
    });
    t.is(wrong.status, 400);
    t.is(wrong.body.message, 'code: invalid code');
    t.deepEqual(wrong.body.details, [{ field: 'code', message: 'invalid code' }]);

    nextStep();
    const verified = await s.request('POST', '/v1/users/me/2fa/verify', {
      token: u.token,
      body: { code: codeNow(secret) },
    });
    t.is(verified.status, 200, verified.text);
    t.true(verified.body.success);
    t.is(verified.body.platform_slug, 'email');
    t.is(verified.body.backup_codes.length, 10);
    t.is(new Set(verified.body.backup_codes).size, 10);
    const st = await status();
    t.true(st.enabled);
    t.is(st.setup_platform, 'email');
    t.is(st.platform_slug, 'email');
    t.is(st.backup_codes_remaining, 10);
    t.truthy(Date.parse(st.enabled_at));
    // Backup codes are stored one-way.
    const hashes = await s.db('two_factor_backup_codes').where('user_id', u.id).pluck('code_hash');
    t.is(hashes.length, 10);
    for (const c of verified.body.backup_codes) t.false(hashes.some((h: string) => h.includes(c.replace('-', ''))));

    const enabledMail = await mailbox().waitFor(u.email, (m) => m.subject === 'Two-factor authentication is on');
    t.regex(enabledMail.text, /from Email on \d{1,2} \w{3} \d{4}, \d{2}:\d{2} UTC/);

    // Already enabled: setup and verify refused.
    nextStep();
    const again = await s.request('POST', '/v1/users/me/2fa/setup', { token: u.token, body: {} });
    t.is(again.status, 400);
    t.regex(again.body.message, /already enabled/);
    const reverify = await s.request('POST', '/v1/users/me/2fa/verify', {
      token: u.token,
      body: { code: codeNow(secret) },
    });
    t.is(reverify.status, 400);

    // Regenerate: a backup code is refused; a TOTP code replaces the codes; old ones are dead at once.
    const byBackup = await s.request('POST', '/v1/users/me/2fa/backup-codes/regenerate', {
      token: u.token,
      body: { code: verified.body.backup_codes[0] },
    });
    t.is(byBackup.status, 400);
    t.regex(byBackup.body.message, /backup code cannot/);
    nextStep();
    const regen = await s.request('POST', '/v1/users/me/2fa/backup-codes/regenerate', {
      token: u.token,
      body: { code: codeNow(secret) },
    });
    t.is(regen.status, 200, regen.text);
    t.is(regen.body.backup_codes.length, 10);
    t.is(regen.body.platform_slug, 'email');
    t.true(regen.body.success);
    await mailbox().waitFor(u.email, (m) => m.subject === 'New backup codes for your account');
    const oldCode = await s.request('DELETE', '/v1/users/me/2fa', {
      token: u.token,
      body: { code: verified.body.backup_codes[1] },
    });
    t.is(oldCode.status, 400, 'an old backup code no longer works');

    // Disable with a new backup code: alert mail, status back to disabled, rows gone.
    const off = await s.request('DELETE', '/v1/users/me/2fa', {
      token: u.token,
      body: { code: regen.body.backup_codes[0] },
    });
    t.is(off.status, 200, off.text);
    t.deepEqual(off.body, { success: true, message: 'two-factor authentication is disabled' });
    t.false((await status()).enabled);
    t.is((await s.db('user_two_factor').where('user_id', u.id)).length, 0);
    t.is((await s.db('two_factor_backup_codes').where('user_id', u.id)).length, 0);
    const alert = await mailbox().waitFor(u.email, (m) => m.subject === 'Two-factor authentication was turned off');
    t.regex(alert.text, /turned off/);
    const offAgain = await s.request('DELETE', '/v1/users/me/2fa', { token: u.token, body: { code: codeNow(secret) } });
    t.is(offAgain.status, 400);
    t.regex(offAgain.body.message, /not enabled/);

    const events = await s.db('audit_events').where('user_id', u.id).orderBy('created_at').pluck('event_type');
    for (const e of ['2fa_enabled', '2fa_backup_codes_regenerated', '2fa_disabled', 'login_failed'])
      t.true(events.includes(e), e);
    const failed = await s.db('audit_events').where({ user_id: u.id, event_type: 'login_failed' });
    t.true(failed.every((f) => f.metadata.reason === 'wrong_2fa_code'));
  },
);

test.serial('setup expires after 10 minutes (service clock moved, no sleep); a new setup starts over', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const setup = await s.request('POST', '/v1/users/me/2fa/setup', { token: u.token, body: {} });
  advanceClock(10 * 60_000 + 1000);
  const late = await s.request('POST', '/v1/users/me/2fa/verify', {
    token: u.token,
    body: { code: codeNow(setup.body.secret) },
  });
  t.is(late.status, 400);
  t.is(late.body.message, 'setup expired: call setup again');
  const fresh = await s.request('POST', '/v1/users/me/2fa/setup', { token: u.token, body: {} });
  t.not(fresh.body.secret, setup.body.secret);
  advanceClock(9 * 60_000);
  const inTime = await s.request('POST', '/v1/users/me/2fa/verify', {
    token: u.token,
    body: { code: codeNow(fresh.body.secret) },
  });
  t.is(inTime.status, 200, inTime.text);
});

test.serial('one step of drift either side is accepted, two are not; a code is accepted once', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const { secret } = await enableTwoFactor(s, u.token);
  // Past the step verify used, so the two steps before now are fresh (never used: not a replay).
  nextStep();
  nextStep();
  const regen = (code: string) =>
    s.request('POST', '/v1/users/me/2fa/backup-codes/regenerate', { token: u.token, body: { code } });
  // Before any ±1 code is accepted, which would raise the replay floor past the step two back.
  t.is((await regen(codeNow(secret, -2))).status, 400, 'two steps back');
  t.is((await regen(codeNow(secret, 2))).status, 400, 'two steps ahead');
  t.is((await regen(codeNow(secret, 3))).status, 400, 'three steps ahead');
  t.is((await regen(codeNow(secret, -1))).status, 200, 'one step back');
  nextStep();
  nextStep();
  t.is((await regen(codeNow(secret, 1))).status, 200, 'one step ahead');
  t.is((await regen(codeNow(secret, 1))).status, 400, 'the same code again (replay)');
  // Not even an older unused step after a newer one.
  t.is((await regen(codeNow(secret, 0))).status, 400, 'an older step after a newer one');
});

test.serial('an unknown user_id is a 404 on every 2FA route, and each documents it', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const nobody = '00000000-0000-4000-8000-000000000000';
  const doc = (await s.request('GET', '/v1/openapi.json')).body;
  for (const [method, path] of [
    ['POST', '/v1/users/me/2fa/verify'],
    ['DELETE', '/v1/users/me/2fa'],
    ['POST', '/v1/users/me/2fa/backup-codes/regenerate'],
  ] as const) {
    const r = await s.request(method, path, { token: admin.token, body: { code: '123456', user_id: nobody } });
    t.is(r.status, 404, `${method} ${path}: ${r.text}`);
    t.truthy(doc.paths[path][method.toLowerCase()].responses['404'], `${method} ${path} documents 404`);
  }
});

test.serial(
  'backup codes are hashed before the 2FA row is locked: verify, regenerate and a backup-code disable; a wrong code hashes no new set',
  async (t) => {
    const s = stack();
    const u = await createUser(s.db);
    // Every argon2id hash of a backup code, and whether a transaction held a lock on the 2FA rows
    // while it ran (FOR UPDATE leaves a RowShareLock on the table until the transaction ends).
    const module = totp as unknown as Record<string, unknown>;
    const original = totp.hashBackupCode;
    const seen: number[] = [];
    module.hashBackupCode = async (userId: string, code: string) => {
      const { rows } = await s.db.raw(
        `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
          WHERE c.relname = 'user_two_factor' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      );
      seen.push(rows[0].n);
      return original(userId, code);
    };
    try {
      const setup = await s.request('POST', '/v1/users/me/2fa/setup', { token: u.token, body: {} });
      nextStep();
      const wrong = await s.request('POST', '/v1/users/me/2fa/verify', {
        token: u.token,
        body: { code: codeNow(setup.body.secret) === '000000' ? '111111' : '000000' },
      });
      t.is(wrong.status, 400);
      t.deepEqual(seen, [], 'a wrong TOTP code costs no hash');
      const verified = await s.request('POST', '/v1/users/me/2fa/verify', {
        token: u.token,
        body: { code: codeNow(setup.body.secret) },
      });
      t.is(verified.status, 200, verified.text);
      t.is(seen.length, 10);
      nextStep();
      const regen = await s.request('POST', '/v1/users/me/2fa/backup-codes/regenerate', {
        token: u.token,
        body: { code: codeNow(setup.body.secret) },
      });
      t.is(regen.status, 200, regen.text);
      t.is(seen.length, 20);
      const off = await s.request('DELETE', '/v1/users/me/2fa', {
        token: u.token,
        body: { code: regen.body.backup_codes[3] },
      });
      t.is(off.status, 200, off.text);
      t.is(seen.length, 21);
      t.deepEqual(
        seen.filter((n) => n > 0),
        [],
        'no hash ran while a transaction held the 2FA row',
      );
      // The codes the answers showed are the ones stored: the set hashed before the lock was kept.
      t.is(await s.db('user_two_factor').where('user_id', u.id).first(), undefined);
    } finally {
      module.hashBackupCode = original;
    }
  },
);

test.serial('the right code sent several times at once: one success, the repeats are no wrong guesses', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const { secret } = await enableTwoFactor(s, u.token);
  const code = codeNow(secret);
  const answers = await Promise.all(
    Array.from({ length: 4 }, () =>
      s.request('POST', '/v1/users/me/2fa/backup-codes/regenerate', { token: u.token, body: { code } }),
    ),
  );
  const statuses = answers.map((r) => r.status).sort();
  t.is(statuses.filter((x) => x === 200).length, 1, JSON.stringify(statuses));
  t.true(
    answers.every((r) => r.status === 200 || r.status === 400),
    answers.map((r) => r.text).join(' | '),
  );
  // No repeat counted as a guess, nor recorded as a wrong code.
  const counter = await s.db('attempt_counters').where('key', `2fa:${u.id}`).first('count');
  t.is(Number(counter?.count ?? 0), 0, JSON.stringify(counter));
  const wrong = await s
    .db('audit_events')
    .where({ user_id: u.id, event_type: 'login_failed' })
    .whereRaw("metadata->>'reason' = 'wrong_2fa_code'");
  t.is(wrong.length, 0);
  // A wrong code still counts.
  nextStep();
  const bad = await s.request('POST', '/v1/users/me/2fa/backup-codes/regenerate', {
    token: u.token,
    body: { code: codeNow(secret) === '000000' ? '111111' : '000000' },
  });
  t.is(bad.status, 400);
  t.is(Number((await s.db('attempt_counters').where('key', `2fa:${u.id}`).first('count'))?.count), 1);
});
