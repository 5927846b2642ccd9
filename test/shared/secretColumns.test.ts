import test from 'ava';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Model } from 'objection';
import { startApi } from '../../api/server';
import { refreshIntegrationTokens } from '../../shared/commands/integrationTokens';
import { rotateSecrets } from '../../shared/commands/rotateSecrets';
import { loadConfig } from '../../shared/config';
import { decryptSecret, secretKeyId, sealedWith } from '../../shared/crypto';
import { transaction } from '../../shared/db';
import { writeAccountEmail } from '../../shared/emails/outbox';
import { Integration } from '../../shared/models/Integration';
import { ENCRYPTED_COLUMNS } from '../../shared/secretColumns';
import { createUser, TestUser } from '../helpers/factories';
import { fakeUser, useStreamPlatformStack } from '../helpers/fakeStreamPlatform';
import { enableTwoFactor } from '../twoFactor/helpers';
import { runToEnd } from '../helpers/processes';

/**
 * Every sealed value in the database (shared/crypto.ts encryptSecret) is registered in
 * shared/secretColumns.ts, so rotate-secrets re-encrypts it, and is read with the key ring, so it
 * keeps working while SECRETS_KEY_PREVIOUS is set (README "Rotating SECRETS_KEY"). The values are
 * written by the features themselves (2FA setup, an account mail, a stream integration against the
 * local fake platform); the database is then searched for sealed values and sealed-looking columns.
 */

const { stack, fake } = useStreamPlatformStack(test);

const CLI = path.resolve(__dirname, '../../scripts/cli.js');
const REDIRECT = 'https://app.example.test/integrations/done';
/** The key both tests rotate to (a second rotation would need the first one's key in its ring). */
const newKey = randomBytes(32);
const registered = new Set(ENCRYPTED_COLUMNS.map((c) => `${c.table}.${c.column}`));

/** Connects a new platform account for `user` through the given api (connect → consent → callback). */
async function connectIntegration(url: string, user: TestUser): Promise<string> {
  const pu = fakeUser();
  fake().users.set(pu.id, pu);
  const started = await fetch(`${url}/v1/integrations/platform/stream/connect`, {
    method: 'POST',
    headers: { authorization: `Bearer ${user.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ redirect_uri: REDIRECT }),
  });
  if (started.status !== 200) throw new Error(`connect: ${started.status} ${await started.text()}`);
  fake().consentingUser = pu.id;
  const consent = await fake().consent(((await started.json()) as any).authorization_url);
  const cb = await fetch(`${url}${consent.location.pathname}${consent.location.search}`, { redirect: 'manual' });
  const id = new URL(cb.headers.get('location')!).searchParams.get('integration_id');
  if (!id) throw new Error(`no integration: ${cb.headers.get('location')}`);
  return id;
}

/** An api on this stack's database and Redis with other SECRETS_KEY values (rebinds Objection after). */
async function withApi<T>(keys: Record<string, string>, fn: (url: string) => Promise<T>): Promise<T> {
  const s = stack();
  const api = await startApi(loadConfig({ ...s.env, ...keys }), { port: 0, drainIdleGraceMs: 0 });
  Model.knex(s.db);
  try {
    return await fn(`http://127.0.0.1:${api.port}`);
  } finally {
    await api.close();
    Model.knex(s.db);
  }
}

/** Every text column of the schema, as `table.column`. */
async function textColumns(): Promise<Array<{ table: string; column: string }>> {
  const rows = await stack()
    .db('information_schema.columns')
    .where('table_schema', stack().db.raw('current_schema()'))
    .whereIn('data_type', ['text', 'character varying'])
    .whereNot('table_name', 'like', 'knex_%')
    .select('table_name as table', 'column_name as column');
  return rows;
}

/** The text columns holding at least one value that matches the regular expression. */
async function columnsHolding(pattern: string): Promise<string[]> {
  const found: string[] = [];
  for (const c of await textColumns()) {
    const hit = await stack().db(c.table).where(c.column, '~', pattern).first(stack().db.raw('1 as x'));
    if (hit) found.push(`${c.table}.${c.column}`);
  }
  return found.sort();
}

/** POST an integration route as `user`; the status and the body's text. */
async function post(url: string, user: TestUser, route: string): Promise<{ status: number; text: string }> {
  const res = await fetch(url + route, { method: 'POST', headers: { authorization: `Bearer ${user.token}` } });
  return { status: res.status, text: await res.text() };
}

const cli = (keys: Record<string, string>) =>
  runToEnd(process.execPath, [CLI, 'rotate-secrets'], {
    env: { ...process.env, ...stack().env, ...keys, LOG_LEVEL: 'silent' },
  });

test.serial(
  'every sealed column is registered; a rotation keeps integrations working and leaves no old key',
  async (t) => {
    const s = stack();
    const oldKey = s.config.secretsKey;
    const ring = { SECRETS_KEY: newKey.toString('base64'), SECRETS_KEY_PREVIOUS: oldKey.toString('base64') };

    // Sealed values written by the features, under the old key.
    const u = await createUser(s.db);
    await enableTwoFactor(s, u.token);
    await transaction(s.db, (trx) =>
      writeAccountEmail(trx, s.config, {
        to: u.email,
        userId: u.id,
        template: 'password_reset',
        locale: 'en',
        vars: { expiresAt: new Date(Date.now() + 3_600_000) },
        token: 'reset-token',
      }),
    );
    const a = await connectIntegration(s.url, u);
    const b = await connectIntegration(s.url, u);

    // Every column that holds a sealed value, or is named like one, is one rotate-secrets re-encrypts.
    const holding = await columnsHolding('^v[12]:');
    t.deepEqual(
      holding.filter((c) => !registered.has(c)),
      [],
      'sealed values in a column missing from shared/secretColumns.ts',
    );
    t.true(holding.includes('integrations.access_token_sealed'), holding.join(' '));
    const named = (await textColumns())
      .map((c) => `${c.table}.${c.column}`)
      .filter((c) => /seal|encrypt|cipher/i.test(c.split('.')[1]));
    t.deepEqual(
      named.filter((c) => !registered.has(c)),
      [],
    );
    t.deepEqual([...registered].filter((c) => !named.includes(c)).sort(), [], 'registered columns that do not exist');

    // Step 2 of the rotation: processes on the new key with the old one as SECRETS_KEY_PREVIOUS.
    await withApi(ring, async (url) => {
      const stats = await post(url, u, `/v1/integrations/${a}/stats`);
      t.is(stats.status, 200, stats.text);
      const refresh = await post(url, u, `/v1/integrations/${b}/refresh`);
      t.is(refresh.status, 200, refresh.text);
    });

    // Step 3: rotate-secrets re-encrypts the integration's tokens with the rest.
    const r = await cli(ring);
    t.is(r.status, 0, r.stderr);
    t.regex(r.stdout, /integrations\.access_token_sealed: 1 re-encrypted, 1 already current/);
    t.regex(r.stdout, /integrations\.refresh_token_sealed: 1 re-encrypted, 1 already current/);
    t.deepEqual(await columnsHolding(`^v2:${secretKeyId(oldKey)}:`), [], 'values still under the old key');
    t.deepEqual(await columnsHolding('^v1:'), [], 'values still in the old format');
    const row = await s.db('integrations').where('id', a).first();
    t.true(sealedWith(row.access_token_sealed, newKey));
    t.true(fake().accessTokens.has(decryptSecret(row.access_token_sealed, newKey)));

    // Step 4: without SECRETS_KEY_PREVIOUS, the integrations still work.
    await withApi({ SECRETS_KEY: ring.SECRETS_KEY }, async (url) => {
      for (const id of [a, b]) {
        const refresh = await post(url, u, `/v1/integrations/${id}/refresh`);
        t.is(refresh.status, 200, refresh.text);
        const stats = await post(url, u, `/v1/integrations/${id}/stats`);
        t.is(stats.status, 200, stats.text);
      }
    });
  },
);

test.serial('a token refresh that read its row before rotate-secrets re-sealed it keeps the new tokens', async (t) => {
  const s = stack();
  const oldKey = s.config.secretsKey;
  const u = await createUser(s.db);
  const id = await connectIntegration(s.url, u);
  const stale = await Integration.query(s.db).findById(id);
  // rotate-secrets runs between the refresh's read and its write.
  await rotateSecrets(s.db, [newKey, oldKey]);
  const config = loadConfig({
    ...s.env,
    SECRETS_KEY: newKey.toString('base64'),
    SECRETS_KEY_PREVIOUS: oldKey.toString('base64'),
  });
  const row = await refreshIntegrationTokens({ db: s.db, config, logger: s.api.services.logger }, stale!);
  const stored = await s.db('integrations').where('id', id).first();
  t.is(stored.access_token_sealed, row.access_token_sealed);
  t.true(sealedWith(stored.refresh_token_sealed, newKey));
  t.is(fake().issued.at(-1), decryptSecret(stored.refresh_token_sealed, newKey), 'the tokens of this refresh are kept');
  t.true(fake().accessTokens.has(decryptSecret(stored.access_token_sealed, newKey)));
  t.false(
    decryptSecret(stored.access_token_sealed, newKey) === decryptSecret(stale!.access_token_sealed, oldKey),
    'the access token was replaced',
  );
});
