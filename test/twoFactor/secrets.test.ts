import test from 'ava';
import { createCipheriv, randomBytes } from 'node:crypto';
import path from 'node:path';
import { Model } from 'objection';
import { startApi } from '../../api/server';
import { setClockOffset } from '../../shared/clock';
import { loadConfig } from '../../shared/config';
import { decryptSecret, encryptSecret, sealedWith, secretKeyId } from '../../shared/crypto';
import { hashPassword } from '../../shared/domain/passwords';
import { ENCRYPTED_COLUMNS } from '../../shared/secretColumns';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { codeNow, enableTwoFactor } from './helpers';
import { runToEnd } from '../helpers/processes';

const stack = useStack(test);
test.after.always(() => setClockOffset(0));
const CLI = path.resolve(__dirname, '../../scripts/cli.js');

/** The format before key ids: `v1:` + base64(iv | tag | ciphertext). */
function legacySeal(plain: string, key: Buffer): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
  return 'v1:' + Buffer.concat([iv, c.getAuthTag(), body]).toString('base64');
}

test('sealed secrets carry their key id, a random IV, and open only with their key, untampered', (t) => {
  const k1 = randomBytes(32);
  const k2 = randomBytes(32);
  const a = encryptSecret('JBSWY3DPEHPK3PXP', k1);
  const b = encryptSecret('JBSWY3DPEHPK3PXP', k1);
  t.not(a, b, 'random IV');
  t.true(a.startsWith(`v2:${secretKeyId(k1)}:`));
  t.false(a.includes('JBSWY3DPEHPK3PXP'));
  t.is(decryptSecret(a, k1), 'JBSWY3DPEHPK3PXP');
  t.throws(() => decryptSecret(a, k2), { message: /unknown key/ });
  t.is(decryptSecret(a, [k2, k1]), 'JBSWY3DPEHPK3PXP', 'a ring finds the key by id');
  const raw = Buffer.from(a.split(':')[2], 'base64');
  raw[raw.length - 1] ^= 1;
  t.throws(() => decryptSecret(`v2:${secretKeyId(k1)}:${raw.toString('base64')}`, k1));
  // The old format keeps working, with the key it was sealed with.
  const old = legacySeal('mail-token', k1);
  t.is(decryptSecret(old, k1), 'mail-token');
  t.is(decryptSecret(old, [k2, k1]), 'mail-token');
  t.throws(() => decryptSecret(old, k2));
  t.false(sealedWith(old, k1));
  t.deepEqual(
    ENCRYPTED_COLUMNS.map((c) => `${c.table}.${c.column}`),
    [
      'email_outbox.token_sealed',
      'user_two_factor.secret_encrypted',
      'integrations.access_token_sealed',
      'integrations.refresh_token_sealed',
    ],
  );
});

test('rotate-secrets re-encrypts every registered column under the new key; 2FA keeps working on it', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  await s
    .db('platform_accounts')
    .where('user_id', u.id)
    .update({ password_hash: await hashPassword('pw-123456789') });
  const { secret } = await enableTwoFactor(s, u.token);
  const before = (await s.db('user_two_factor').where('user_id', u.id).first()).secret_encrypted;
  t.false(before.includes(secret));
  t.is(decryptSecret(before, s.config.secretsKey), secret);
  t.throws(() => decryptSecret(before, randomBytes(32)));
  // A pending mail token in the old format.
  const [mail] = await s
    .db('email_outbox')
    .insert({
      to_address: 'x@example.test',
      subject: 's',
      text_body: 't',
      status: 'logged',
      token_sealed: legacySeal('tok', s.config.secretsKey),
    })
    .returning('id');

  const newKey = randomBytes(32).toString('base64');
  const env = {
    ...s.env,
    SECRETS_KEY: newKey,
    SECRETS_KEY_PREVIOUS: s.config.secretsKey.toString('base64'),
    LOG_LEVEL: 'silent',
  };
  const r = await runToEnd(process.execPath, [CLI, 'rotate-secrets'], { env: { ...process.env, ...env } });
  t.is(r.status, 0, r.stderr);
  t.regex(r.stdout, /user_two_factor\.secret_encrypted: 1 re-encrypted/);
  t.regex(r.stdout, /email_outbox\.token_sealed: \d+ re-encrypted/);

  const k2 = Buffer.from(newKey, 'base64');
  const after = (await s.db('user_two_factor').where('user_id', u.id).first()).secret_encrypted;
  t.true(sealedWith(after, k2));
  t.is(decryptSecret(after, k2), secret);
  t.throws(() => decryptSecret(after, s.config.secretsKey), undefined, 'the old key no longer opens it');
  const token = (await s.db('email_outbox').where('id', mail.id).first()).token_sealed;
  t.is(decryptSecret(token, k2), 'tok');
  // A second run has nothing to do.
  const again = await runToEnd(process.execPath, [CLI, 'rotate-secrets'], { env: { ...process.env, ...env } });
  t.regex(again.stdout, /user_two_factor\.secret_encrypted: 0 re-encrypted, \d+ already current/);

  // An api on the new key alone signs the user in with the second factor.
  const api = await startApi(loadConfig({ ...s.env, SECRETS_KEY: newKey }), { port: 0, drainIdleGraceMs: 0 });
  Model.knex(s.db);
  try {
    const url = `http://127.0.0.1:${api.port}`;
    const post = async (p: string, body: unknown) =>
      (
        await fetch(url + p, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        })
      ).json() as Promise<any>;
    const login = await post('/v1/auth/login', { email: u.email, password: 'pw-123456789' });
    t.true(login.requires_two_factor);
    const done = await post('/v1/auth/2fa/check', { challenge_token: login.challenge_token, code: codeNow(secret) });
    t.truthy(done.session?.sessionToken, JSON.stringify(done));
  } finally {
    await api.close();
    Model.knex(s.db);
  }
});

test.serial('cleanupTwoFactorSetups deletes setups never confirmed in time, and nothing else', async (t) => {
  const s = stack();
  const stale = await createUser(s.db);
  const fresh = await createUser(s.db);
  const enabled = await createUser(s.db);
  for (const u of [stale, fresh])
    t.is((await s.request('POST', '/v1/users/me/2fa/setup', { token: u.token, body: {} })).status, 200);
  await enableTwoFactor(s, enabled.token);
  // The stale setup's 10 minutes are over; the enabled row's old setup time is too (it must stay).
  await s
    .db('user_two_factor')
    .whereIn('user_id', [stale.id, enabled.id])
    .update({ setup_expires_at: new Date(Date.now() - 60_000) });
  const { scheduledTasks } = await import('../../workers/processors/scheduled');
  const result = await scheduledTasks.cleanupTwoFactorSetups(s.api.services);
  t.true(result.deleted >= 1);
  const left = (await s.db('user_two_factor').whereIn('user_id', [stale.id, fresh.id, enabled.id])).map(
    (r: { user_id: string }) => r.user_id,
  );
  t.false(left.includes(stale.id));
  t.true(left.includes(fresh.id));
  t.true(left.includes(enabled.id));
  t.true((await s.request('GET', '/v1/users/me/2fa/status', { token: enabled.token })).body.enabled);
  // The rotation test of this file counts the table's rows.
  await s.db('user_two_factor').whereIn('user_id', [fresh.id, enabled.id]).delete();
});
