import test from 'ava';
import { execFile, spawnSync } from 'node:child_process';
import path from 'node:path';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);
const CLI = path.resolve(__dirname, '../../scripts/cli.js');

function cli(...args: string[]) {
  const s = stack();
  return spawnSync(process.execPath, [CLI, ...args], {
    env: { ...process.env, DATABASE_URL: s.config.databaseUrl, REDIS_URL: s.config.redisUrl, REDIS_PREFIX: s.config.redisPrefix, LOG_LEVEL: 'silent' },
    encoding: 'utf8',
    timeout: 30000,
  });
}

test('migrate is idempotent and seed reports progress', (t) => {
  const m = cli('migrate');
  t.is(m.status, 0, m.stderr);
  t.regex(m.stdout, /already up to date/);
  const s = cli('seed');
  t.is(s.status, 0, s.stderr);
  t.regex(s.stdout, /\[1\/5\] seeding permissions/);
  t.regex(s.stdout, /7 roles/);
});

test('create-api-key prints a working key once; only its hash is stored', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_developer'] });
  const r = cli('create-api-key', '--user', user.email, '--name', 'tracker', '--scopes', 'gps:read,gps:write');
  t.is(r.status, 0, r.stderr);
  const key = r.stdout.trim().split('\n').pop()!;
  t.regex(key, /^sk_/);
  const me = await s.request('POST', '/v1/gql', { token: key, body: { query: '{ me { apiKeyId permissions } }' } });
  t.deepEqual(me.body.data.me.permissions, ['gps:read', 'gps:write']);
  t.is(await s.db('api_keys').where('key_hash', key).first(), undefined);

  const sys = cli('create-api-key', '--name', 'ops', '--system');
  t.is(sys.status, 0, sys.stderr);
  const sysKey = sys.stdout.trim().split('\n').pop()!;
  const sme = await s.request('POST', '/v1/gql', { token: sysKey, body: { query: '{ me { isSuperAdmin } }' } });
  t.true(sme.body.data.me.isSuperAdmin);

  const bad = cli('create-api-key', '--user', user.id, '--name', 'x', '--scopes', 'nope:nothing');
  t.is(bad.status, 1);
  t.regex(bad.stderr, /unknown scopes: nope:nothing/);
});

test('grant-role finds users by id, username or email and roles by name or id', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: [] });
  for (const [ref, role] of [[user.username, 'Moderator'], [user.email, 'role_developer'], [user.id, 'api read only']]) {
    const r = cli('grant-role', ref, role);
    t.is(r.status, 0, r.stderr);
  }
  const roles = (await s.db('user_roles').where('user_id', user.id).pluck('role_id')).sort();
  t.deepEqual(roles, ['role_api_read_only', 'role_developer', 'role_moderator']);
  const missing = cli('grant-role', 'nobody', 'Admin');
  t.is(missing.status, 1);
  t.regex(missing.stderr, /no user/);
});

/** Runs the CLI without blocking this process, whose api must acknowledge the CLI's invalidations. */
function cliAsync(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const s = stack();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { ...process.env, DATABASE_URL: s.config.databaseUrl, REDIS_URL: s.config.redisUrl, REDIS_PREFIX: s.config.redisPrefix, LOG_LEVEL: 'silent' }, encoding: 'utf8', timeout: 30000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

test.serial('grant-role and seed drop cached credentials on running instances before they exit', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: [] });
  t.is((await s.request('GET', '/v1/gps', { token: user.token })).status, 403); // cached: holds nothing
  const g = await cliAsync('grant-role', user.id, 'Developer');
  t.is(g.code, 0, g.stderr);
  t.is((await s.request('GET', '/v1/gps', { token: user.token })).status, 200);

  // A default grant missing from the database (removed behind the service's back) comes back with
  // seed, and running instances see it on their next request.
  const perm = (await s.db('permissions').where({ resource: 'gps', action: 'read' }).first('id')).id;
  await s.db('role_permissions').where({ role_id: 'role_developer', permission_id: perm }).delete();
  await s.api.services.bus.invalidateAuth({ all: true });
  t.is((await s.request('GET', '/v1/gps', { token: user.token })).status, 403);
  const seeded = await cliAsync('seed');
  t.is(seeded.code, 0, seeded.stderr);
  t.is((await s.request('GET', '/v1/gps', { token: user.token })).status, 200);
});
