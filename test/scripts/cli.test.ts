import test from 'ava';
import path from 'node:path';
import { sha256 } from '../../shared/crypto';
import { createUser } from '../helpers/factories';
import { runToEnd, type RunResult } from '../helpers/processes';
import { useStack } from '../helpers/stack';

const stack = useStack(test);
const CLI = path.resolve(__dirname, '../../scripts/cli.js');

function cli(...args: string[]) {
  return cliWith({}, ...args);
}

/** The environment the CLI runs with: the stack's database and Redis, and `env`. */
function cliEnv(env: Record<string, string> = {}): NodeJS.ProcessEnv {
  const s = stack();
  return {
    ...process.env,
    ...env,
    DATABASE_URL: s.config.databaseUrl,
    REDIS_URL: s.config.redisUrl,
    REDIS_PREFIX: s.config.redisPrefix,
    LOG_LEVEL: 'silent',
  };
}

function cliWith(env: Record<string, string>, ...args: string[]): Promise<RunResult> {
  return runToEnd(process.execPath, [CLI, ...args], { env: cliEnv(env) });
}

test('migrate is idempotent and seed reports progress', async (t) => {
  const m = await cli('migrate');
  t.is(m.status, 0, m.stderr);
  t.regex(m.stdout, /already up to date/);
  const s = await cli('seed');
  t.is(s.status, 0, s.stderr);
  t.regex(s.stdout, /\[1\/5\] seeding permissions/);
  t.regex(s.stdout, /7 roles/);
});

test.serial(
  'the first seed takes the supported locales from SUPPORTED_LOCALES; later seeds keep what is set',
  async (t) => {
    const s = stack();
    const locales = async () =>
      (await s.db('system_config').where('key', 'auth.supported_locales').first('value'))?.value as string[];
    await s.db('system_config').where('key', 'auth.supported_locales').delete();
    const first = await cliWith({ SUPPORTED_LOCALES: 'en,de,fr' }, 'seed');
    t.is(first.status, 0, first.stderr);
    t.deepEqual(await locales(), ['en', 'de', 'fr']);
    const again = await cliWith({ SUPPORTED_LOCALES: 'en' }, 'seed');
    t.is(again.status, 0, again.stderr);
    t.deepEqual(await locales(), ['en', 'de', 'fr']);
    await s
      .db('system_config')
      .where('key', 'auth.supported_locales')
      .update({ value: JSON.stringify(['en', 'de']) });
  },
);

test('create-api-key prints a working key once; only its hash is stored', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_developer'] });
  const r = await cli('create-api-key', '--user', user.email, '--name', 'tracker', '--scopes', 'gps:read,gps:write');
  t.is(r.status, 0, r.stderr);
  const key = r.stdout.trim().split('\n').pop()!;
  t.regex(key, /^sk_/);
  const me = await s.request('POST', '/v1/gql', { token: key, body: { query: '{ me { apiKeyId permissions } }' } });
  t.deepEqual(me.body.data.me.permissions, ['gps:read', 'gps:write']);
  t.is(await s.db('api_keys').where('key_hash', key).first(), undefined);

  const sys = await cli('create-api-key', '--name', 'ops', '--system');
  t.is(sys.status, 0, sys.stderr);
  const sysKey = sys.stdout.trim().split('\n').pop()!;
  const sme = await s.request('POST', '/v1/gql', { token: sysKey, body: { query: '{ me { isSuperAdmin } }' } });
  t.true(sme.body.data.me.isSuperAdmin);

  t.is((await s.db('api_keys').where('key_hash', sha256(sysKey)).first('user_id')).user_id, null);
  // A system key has no owner whose deletion could take it along.
  const owned = await cli('create-api-key', '--user', user.email, '--name', 'x', '--system');
  t.is(owned.status, 1, owned.stdout);
  t.regex(owned.stderr, /--system keys belong to no user/);

  // Scopes cannot narrow a system key: refused rather than silently dropped.
  const narrowed = await cli('create-api-key', '--name', 'x', '--system', '--scopes', 'gps:read');
  t.is(narrowed.status, 1, narrowed.stdout);
  t.regex(narrowed.stderr, /--scopes cannot narrow a --system key/);

  const bad = await cli('create-api-key', '--user', user.id, '--name', 'x', '--scopes', 'nope:nothing');
  t.is(bad.status, 1);
  t.regex(bad.stderr, /unknown scopes: nope:nothing/);
  // An empty list (an unset variable, say) is refused, not read as the owner's whole power.
  for (const empty of ['', ' , ']) {
    const none = await cli('create-api-key', '--user', user.id, '--name', 'x', '--scopes', empty);
    t.is(none.status, 1, none.stdout);
    t.regex(none.stderr, /--scopes is empty/);
  }
  t.is(await s.db('api_keys').where({ user_id: user.id, name: 'x' }).first(), undefined);
});

test('a database that cannot be reached: one error line, no stack trace', async (t) => {
  const s = stack();
  const url = new URL(s.config.databaseUrl);
  url.port = '1';
  for (const command of ['migrate', 'list-roles']) {
    const r = await runToEnd(process.execPath, [CLI, command], {
      env: { ...process.env, DATABASE_URL: url.toString(), LOG_LEVEL: 'silent' },
    });
    t.is(r.status, 1, command);
    t.regex(r.stderr, /^error: .*ECONNREFUSED/, command);
    t.is(r.stderr.trim().split('\n').length, 1, `${command}: ${r.stderr}`);
  }
});

test('grant-role finds users by id, username or email and roles by name or id', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: [] });
  for (const [ref, role] of [
    [user.username, 'Moderator'],
    [user.email, 'role_developer'],
    [user.id, 'api read only'],
  ]) {
    const r = await cli('grant-role', ref, role);
    t.is(r.status, 0, r.stderr);
  }
  const roles = (await s.db('user_roles').where('user_id', user.id).pluck('role_id')).sort();
  t.deepEqual(roles, ['role_api_read_only', 'role_developer', 'role_moderator']);
  const missing = await cli('grant-role', 'nobody', 'Admin');
  t.is(missing.status, 1);
  t.regex(missing.stderr, /no user/);
});

test.serial('grant-role and seed drop cached credentials on running instances before they exit', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: [] });
  t.is((await s.request('GET', '/v1/gps', { token: user.token })).status, 403); // cached: holds nothing
  const g = await cli('grant-role', user.id, 'Developer');
  t.is(g.status, 0, g.stderr);
  t.is((await s.request('GET', '/v1/gps', { token: user.token })).status, 200);

  // A default grant missing from the database (removed behind the service's back) comes back with
  // seed, and running instances see it on their next request.
  const perm = (await s.db('permissions').where({ resource: 'gps', action: 'read' }).first('id')).id;
  await s.db('role_permissions').where({ role_id: 'role_developer', permission_id: perm }).delete();
  await s.api.services.bus.invalidateAuth({ all: true });
  t.is((await s.request('GET', '/v1/gps', { token: user.token })).status, 403);
  const seeded = await cli('seed');
  t.is(seeded.status, 0, seeded.stderr);
  t.is((await s.request('GET', '/v1/gps', { token: user.token })).status, 200);
});

/** The value after the last ': ' of the first output line starting with `label`. */
function printed(stdout: string, label: string): string {
  const line = stdout.split('\n').find((l) => l.startsWith(label));
  if (!line) throw new Error(`no "${label}" line in: ${stdout}`);
  return line.slice(line.lastIndexOf(': ') + 2);
}

test('create-admin makes a verified email administrator whose printed session token and API key work', async (t) => {
  const s = stack();
  const r = await cli('create-admin', '--email', 'First.Admin@Example.test', '--api-key');
  t.is(r.status, 0, r.stderr);
  t.regex(
    r.stdout,
    /created administrator \S+ \([0-9a-f-]{36}\) <first\.admin@example\.test>: email verified, role Admin/,
  );
  const token = printed(r.stdout, 'session token');
  t.regex(token, /^sess_/);
  t.is((await s.request('GET', '/v1/users', { token })).status, 200);
  const me = await s.request('POST', '/v1/gql', { token, body: { query: '{ me { isSuperAdmin } }' } });
  t.true(me.body.data.me.isSuperAdmin);

  const key = printed(r.stdout, 'api key');
  t.regex(key, /^sk_/);
  t.regex(r.stdout, /api key \S+ \(scopes \*:\*, shown only once\)/);
  t.is((await s.request('GET', '/v1/users', { token: key })).status, 200);

  // The generated password was printed once and signs in: the account is a verified email account.
  const password = printed(r.stdout, 'password (generated');
  t.true(password.length >= 16);
  const login = await s.request('POST', '/v1/auth/login', { body: { email: 'first.admin@example.test', password } });
  t.is(login.status, 200, login.text);
  const account = await s
    .db('platform_accounts as pa')
    .join('platforms as p', 'p.id', 'pa.platform_id')
    .where('pa.email', 'first.admin@example.test')
    .first('p.slug', 'pa.email_verified_at', 'pa.password_hash');
  t.is(account.slug, 'email');
  t.truthy(account.email_verified_at);
  t.regex(account.password_hash, /^\$argon2id\$/);

  const again = await cli('create-admin', '--email', 'first.admin@example.test');
  t.is(again.status, 1);
  t.regex(
    again.stderr,
    /already has an account: make it an administrator with: npm run cli -- grant-role first\.admin@example\.test Admin/,
  );
});

test('create-admin with --password uses it and does not print it', async (t) => {
  const s = stack();
  const r = await cli('create-admin', '--email', 'second.admin@example.test', '--password', 'correct-horse-battery');
  t.is(r.status, 0, r.stderr);
  t.false(r.stdout.includes('correct-horse-battery'));
  t.false(/api key/.test(r.stdout));
  t.is(
    (
      await s.request('POST', '/v1/auth/login', {
        body: { email: 'second.admin@example.test', password: 'correct-horse-battery' },
      })
    ).status,
    200,
  );
  const short = await cli('create-admin', '--email', 'third.admin@example.test', '--password', 'short');
  t.is(short.status, 1);
  t.regex(short.stderr, /--password: must be 8 to 256 characters/);
});

test('create-api-key without --scopes gives the key what its owner holds, and says so', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const r = await cli('create-api-key', '--user', dev.email, '--name', 'tracker');
  t.is(r.status, 0, r.stderr);
  t.regex(r.stdout, /no --scopes given: the key holds \S+'s permissions: .*gps:write/);
  const key = r.stdout.trim().split('\n').pop()!;
  t.is((await s.request('GET', '/v1/gps', { token: key })).status, 200);
  t.is((await s.request('POST', '/v1/devices', { token: key, body: { name: 'tracker-1' } })).status, 201);
  // Not what the owner lacks.
  t.is((await s.request('GET', '/v1/users', { token: key })).status, 403);
  const row = await s.db('api_keys').where('key_prefix', key.slice(0, 12)).first('scopes');
  t.deepEqual(
    [...row.scopes].sort(),
    (
      await s.request('POST', '/v1/gql', { token: dev.token, body: { query: '{ me { permissions } }' } })
    ).body.data.me.permissions.sort(),
  );
});

test('list-roles names the seven default roles with their permissions', async (t) => {
  const r = await cli('list-roles');
  t.is(r.status, 0, r.stderr);
  for (const name of ['Admin', 'User', 'Moderator', 'Developer', 'API Read Only', 'API Full Access', 'System'])
    t.regex(r.stdout, new RegExp(`^${name} \\(id role_`, 'm'));
  t.regex(r.stdout, /^Admin \(id role_admin[^\n]*\n {2}\*:\*$/m);
  t.regex(r.stdout, /^Developer [^\n]*\n {2}[^\n]*gps:write/m);
});

test('output into a pipe closed early (`| head`): no stack trace, exit 0', async (t) => {
  const r = await runToEnd(
    'bash',
    ['-c', `set -o pipefail; "${process.execPath}" "${CLI}" list-roles | true; echo "cli=$?" >&2`],
    { env: cliEnv() },
  );
  t.regex(r.stderr, /cli=0/);
  t.false(/EPIPE|Error|at /.test(r.stderr.replace(/cli=\d+\n?/, '')), r.stderr);
});
