import test from 'ava';
import { setClockOffset } from '../../shared/clock';
import { useAccountsStack } from '../helpers/accounts';
import { createUser, TestUser } from '../helpers/factories';
import { codeNow, nextStep } from './helpers';

// Serial: the tests move the service's clock.
const { stack } = useAccountsStack(test);
test.after.always(() => setClockOffset(0));

const gql = (token: string | undefined, query: string, variables: Record<string, unknown> = {}) =>
  stack().request('POST', '/v1/gql', { token, body: { query, variables } });

const STATUS =
  'query ($u: String) { twoFactorStatus(userId: $u) { enabled enabledAt setupPlatform backupCodesRemaining } }';
const REQUIRES =
  'query ($u: String) { userRequiresTwoFactor(userId: $u) { required requiredByRoles enabled canEnable } }';
const SETUP =
  'mutation ($u: String, $p: String) { setupTwoFactor(input: {userId: $u, platformId: $p}) { secret qrCodeUrl qrCodeImage expiresAt platformSlug } }';
const VERIFY =
  'mutation ($c: String!, $u: String) { verifyTwoFactor(input: {code: $c, userId: $u}) { backupCodes message platformSlug success } }';
const REGEN =
  'mutation ($c: String!, $u: String) { regenerateBackupCodes(input: {code: $c, userId: $u}) { backupCodes message platformSlug success } }';
const DISABLE = 'mutation ($c: String!, $u: String) { disableTwoFactor(input: {code: $c, userId: $u}) }';

const errorStatus = (r: { body: any }) => r.body.errors?.[0]?.extensions?.status;

/** Enables 2FA for `userId` through GraphQL as `token`; returns the secret. */
async function enableVia(token: string, userId?: string): Promise<string> {
  const setup = await gql(token, SETUP, { u: userId });
  if (setup.body.errors) throw new Error(JSON.stringify(setup.body.errors));
  nextStep();
  const verify = await gql(token, VERIFY, { c: codeNow(setup.body.data.setupTwoFactor.secret), u: userId });
  if (verify.body.errors) throw new Error(JSON.stringify(verify.body.errors));
  nextStep();
  return setup.body.data.setupTwoFactor.secret;
}

let managerRole = false;
async function manager(): Promise<TestUser> {
  const s = stack();
  if (!managerRole) {
    await s.db('roles').insert({ id: 'role_2fa_manager', name: '2FA Manager', description: 'Manages 2FA' });
    const perm = await s.db('permissions').where({ resource: 'two_factor', action: 'manage' }).first('id');
    await s.db('role_permissions').insert({ role_id: 'role_2fa_manager', permission_id: perm.id });
    managerRole = true;
  }
  return createUser(s.db, { roles: ['role_user', 'role_2fa_manager'] });
}

test.serial('self: every operation through GraphQL, same data as REST', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const before = await gql(u.token, STATUS);
  t.deepEqual(before.body.data.twoFactorStatus, {
    enabled: false,
    enabledAt: null,
    setupPlatform: null,
    backupCodesRemaining: 0,
  });

  const setup = await gql(u.token, SETUP, { p: 'email' });
  const sd = setup.body.data.setupTwoFactor;
  t.regex(sd.secret, /^[A-Z2-7]+$/);
  t.true(sd.qrCodeUrl.startsWith('otpauth://totp/'));
  t.true(sd.qrCodeImage.startsWith('data:image/png;base64,'));
  t.is(sd.platformSlug, 'email');
  t.truthy(Date.parse(sd.expiresAt));
  nextStep();
  const verify = await gql(u.token, VERIFY, { c: codeNow(sd.secret) });
  t.is(verify.body.data.verifyTwoFactor.backupCodes.length, 10);
  t.is(verify.body.data.verifyTwoFactor.platformSlug, 'email');
  t.true(verify.body.data.verifyTwoFactor.success, 'success, as in the REST answer');

  const rest = await s.request('GET', '/v1/users/me/2fa/status', { token: u.token });
  const after = (await gql(u.token, STATUS)).body.data.twoFactorStatus;
  t.deepEqual(after, {
    enabled: true,
    enabledAt: rest.body.enabled_at,
    setupPlatform: 'email',
    backupCodesRemaining: 10,
  });
  t.deepEqual((await gql(u.token, REQUIRES)).body.data.userRequiresTwoFactor, {
    required: false,
    requiredByRoles: [],
    enabled: true,
    canEnable: false,
  });

  const byBackup = await gql(u.token, REGEN, { c: verify.body.data.verifyTwoFactor.backupCodes[0] });
  t.is(errorStatus(byBackup), 400);
  nextStep();
  const regen = await gql(u.token, REGEN, { c: codeNow(sd.secret) });
  t.is(regen.body.data.regenerateBackupCodes.backupCodes.length, 10);
  const off = await gql(u.token, DISABLE, { c: regen.body.data.regenerateBackupCodes.backupCodes[0] });
  t.true(off.body.data.disableTwoFactor);
  t.false((await gql(u.token, STATUS)).body.data.twoFactorStatus.enabled);
});

test.serial('self needs two_factor:write to change it (API Read Only holds only read)', async (t) => {
  const s = stack();
  const reader = await createUser(s.db, { roles: ['role_api_read_only'] });
  t.is((await gql(reader.token, STATUS)).body.data.twoFactorStatus.enabled, false);
  t.is(errorStatus(await gql(reader.token, SETUP)), 403);
  const rest = await s.request('POST', '/v1/users/me/2fa/setup', { token: reader.token, body: {} });
  t.is(rest.status, 403);
  const nobody = await createUser(s.db, { roles: [] });
  t.is(errorStatus(await gql(nobody.token, STATUS)), 403);
  t.is(errorStatus(await gql(undefined, STATUS)), 401);
});

test.serial('another user: refused without two_factor:manage, allowed with it (and the hierarchy)', async (t) => {
  const s = stack();
  const target = await createUser(s.db);
  const peer = await createUser(s.db);
  for (const [q, v] of [
    [STATUS, { u: target.id }],
    [REQUIRES, { u: target.id }],
    [SETUP, { u: target.id }],
    [VERIFY, { u: target.id, c: '123456' }],
    [DISABLE, { u: target.id, c: '123456' }],
    [REGEN, { u: target.id, c: '123456' }],
  ] as const) {
    const r = await gql(peer.token, q, v);
    t.is(errorStatus(r), 403, q);
  }
  const restPeer = await s.request('GET', `/v1/users/me/2fa/status?user_id=${target.id}`, { token: peer.token });
  t.is(restPeer.status, 403);

  const boss = await manager();
  const secret = await enableVia(boss.token, target.id);
  const seen = await gql(boss.token, STATUS, { u: target.id });
  t.true(seen.body.data.twoFactorStatus.enabled);
  // The target sees the same.
  t.true((await s.request('GET', '/v1/users/me/2fa/status', { token: target.token })).body.enabled);
  const restBoss = await s.request('GET', `/v1/users/me/2fa/status?user_id=${target.id}`, { token: boss.token });
  t.is(restBoss.status, 200);
  t.true(restBoss.body.enabled);
  const off = await s.request('DELETE', '/v1/users/me/2fa', {
    token: boss.token,
    body: { user_id: target.id, code: codeNow(secret) },
  });
  t.is(off.status, 200, off.text);

  // Hierarchy: two_factor:manage does not reach an administrator (who holds more).
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  t.is(errorStatus(await gql(boss.token, STATUS, { u: admin.id })), 403);
  // A super admin reaches anyone; unknown users are 404.
  t.is((await gql(admin.token, STATUS, { u: boss.id })).body.data.twoFactorStatus.enabled, false);
  t.is(errorStatus(await gql(admin.token, STATUS, { u: '00000000-0000-4000-8000-000000000000' })), 404);
});

test.serial(
  'system key: GraphQL with userId acts on any user, without it 400; REST 2FA routes are off its allowlist',
  async (t) => {
    const s = stack();
    const u = await createUser(s.db);
    for (const [q, v] of [
      [STATUS, {}],
      [REQUIRES, {}],
      [SETUP, {}],
      [VERIFY, { c: '123456' }],
      [DISABLE, { c: '123456' }],
      [REGEN, { c: '123456' }],
    ] as const) {
      const r = await gql(s.systemKey, q, v);
      t.is(errorStatus(r), 400, q);
      // Named as the argument it is here (REST's query parameter is user_id).
      t.regex(r.body.errors[0].message, /^userId: /);
    }
    const secret = await enableVia(s.systemKey, u.id);
    const st = await gql(s.systemKey, STATUS, { u: u.id });
    t.true(st.body.data.twoFactorStatus.enabled);
    nextStep();
    const regen = await gql(s.systemKey, REGEN, { u: u.id, c: codeNow(secret) });
    t.is(regen.body.data.regenerateBackupCodes.backupCodes.length, 10);
    const bad = await gql(s.systemKey, STATUS, { u: 'not-a-uuid' });
    t.is(errorStatus(bad), 400);

    for (const [method, path] of [
      ['GET', `/v1/users/me/2fa/status?user_id=${u.id}`],
      ['GET', `/v1/users/me/2fa/requirement?user_id=${u.id}`],
      ['POST', '/v1/users/me/2fa/setup'],
      ['POST', '/v1/users/me/2fa/verify'],
      ['DELETE', '/v1/users/me/2fa'],
      ['POST', '/v1/users/me/2fa/backup-codes/regenerate'],
    ]) {
      const r = await s.request(method, path, {
        token: s.systemKey,
        body: method === 'GET' ? undefined : { user_id: u.id, code: '1' },
      });
      t.is(r.status, 403, path);
      t.is(r.body.message, 'system key not permitted on this route');
    }
  },
);

test.serial('requirement from roles and platforms; provider sign-in flags a user who must set 2FA up', async (t) => {
  const s = stack();
  await s.db('roles').insert({ id: 'role_skipper', name: 'Skipper', requires_two_factor: true });
  const signin = (body: Record<string, unknown>) => s.request('POST', '/v1/users/oauth', { token: s.systemKey, body });
  const who = { email: null, name: 'Captain', oauthProvider: 'chat', oauthProviderId: `chat-${Date.now()}` };
  const first = await signin(who);
  t.is(first.status, 200, first.text);
  t.false(first.body.two_factor_setup_required);
  const userId = first.body.data.id;
  await s.db('user_roles').insert({ user_id: userId, role_id: 'role_skipper' });

  const flagged = await signin(who);
  t.true(flagged.body.two_factor_setup_required);
  const OAUTH = `mutation ($i: OauthSigninInput!) { oauthSignin(input: $i) { id twoFactorSetupRequired } }`;
  const g = await gql(s.systemKey, OAUTH, { i: who });
  t.deepEqual(g.body.data.oauthSignin, { id: userId, twoFactorSetupRequired: true });

  const req = await gql(s.systemKey, REQUIRES, { u: userId });
  t.deepEqual(req.body.data.userRequiresTwoFactor, {
    required: true,
    requiredByRoles: ['Skipper'],
    enabled: false,
    canEnable: true,
  });
  const reqRest = await s.request('GET', '/v1/users/me/2fa/requirement', {
    token: (await createUser(s.db, { roles: ['role_admin'] })).token,
  });
  t.false(reqRest.body.required);

  // A platform that requires 2FA counts too.
  await s.db('platforms').where('slug', 'chat').update({ two_factor_required: true });
  try {
    const byPlatform = await gql(s.systemKey, REQUIRES, { u: userId });
    t.true(byPlatform.body.data.userRequiresTwoFactor.required);
    await enableVia(s.systemKey, userId);
    const after = await signin(who);
    t.false(after.body.two_factor_setup_required, 'enabled: nothing to set up');
  } finally {
    await s.db('platforms').where('slug', 'chat').update({ two_factor_required: false });
  }
});
