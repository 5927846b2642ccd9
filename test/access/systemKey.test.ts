import test from 'ava';
import { SYSTEM_KEY_ALLOWLIST } from '../../shared/policies';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);
const REFUSAL = 'system key not permitted on this route';

const refused = (r: { status: number; body: any }) => r.status === 403 && r.body?.message === REFUSAL;

test('each of the 11 allowlisted routes lets the system key through (exact and prefix entries)', async (t) => {
  const s = stack();
  t.is(SYSTEM_KEY_ALLOWLIST.length, 11);
  t.deepEqual(
    SYSTEM_KEY_ALLOWLIST.map((e) => e.path).sort(),
    [
      '/v1/auth/2fa/check',
      '/v1/auth/login',
      '/v1/auth/register/verify',
      '/v1/auth/reset-password',
      '/v1/auth/verify-email',
      '/v1/gql',
      '/v1/internal/audit',
      '/v1/sessions',
      '/v1/users/email',
      '/v1/users/oauth',
      '/v1/ws',
    ].sort(),
  );
  // What each probe answers past the allowlist: the route's own validation (400), its method
  // rule (405), or no HTTP route at all (404); never the refusal, never a server error.
  const expected: Record<string, number> = {
    'GET /v1/users/oauth': 400, // read as /v1/users/:id
    'POST /v1/users/oauth': 400,
    'GET /v1/users/oauth/': 400,
    'POST /v1/users/oauth/': 400,
    'GET /v1/users/email': 400, // read as /v1/users/:id
    'POST /v1/users/email': 405,
    'GET /v1/users/email/probe': 400,
    'POST /v1/users/email/probe': 405,
    'GET /v1/sessions': 405,
    'POST /v1/sessions': 400,
    'GET /v1/sessions/probe': 400,
    'POST /v1/sessions/probe': 405,
    'GET /v1/auth/login': 405,
    'POST /v1/auth/login': 400,
    'GET /v1/auth/login/': 405,
    'POST /v1/auth/login/': 400,
    'GET /v1/auth/2fa/check': 405,
    'POST /v1/auth/2fa/check': 400,
    'GET /v1/auth/2fa/check/': 405,
    'POST /v1/auth/2fa/check/': 400,
    'GET /v1/auth/verify-email': 405,
    'POST /v1/auth/verify-email': 400,
    'GET /v1/auth/verify-email/': 405,
    'POST /v1/auth/verify-email/': 400,
    'GET /v1/auth/reset-password': 404,
    'POST /v1/auth/reset-password': 404,
    'GET /v1/auth/reset-password/probe': 404,
    'POST /v1/auth/reset-password/probe': 404,
    'GET /v1/auth/register/verify': 405,
    'POST /v1/auth/register/verify': 400,
    'GET /v1/auth/register/verify/': 405,
    'POST /v1/auth/register/verify/': 400,
    'GET /v1/internal/audit': 405,
    'POST /v1/internal/audit': 400,
    'GET /v1/internal/audit/': 405,
    'POST /v1/internal/audit/': 400,
    'GET /v1/gql': 400, // no query
    'POST /v1/gql': 400,
    'GET /v1/gql/': 400,
    'POST /v1/gql/': 400,
    'GET /v1/ws': 426, // WebSocket upgrades only: a plain request is told to upgrade
    'POST /v1/ws': 426,
    'GET /v1/ws/': 426,
    'POST /v1/ws/': 426,
  };
  const probed: string[] = [];
  for (const { path, match } of SYSTEM_KEY_ALLOWLIST) {
    const probes = match === 'prefix' ? [path, `${path}/probe`] : [path, `${path}/`];
    for (const p of probes) {
      for (const method of ['GET', 'POST']) {
        const probe = `${method} ${p}`;
        probed.push(probe);
        const r = await s.request(method, p, { token: s.systemKey, body: method === 'POST' ? {} : undefined });
        t.is(r.status, expected[probe], `${probe}: ${r.text}`);
        t.false(refused(r), `${probe} was refused`);
      }
    }
  }
  t.deepEqual(probed.sort(), Object.keys(expected).sort());
});

test('the system key does real work on allowlisted routes: GraphQL, internal sessions, audit ingestion', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const gql = await s.request('POST', '/v1/gql', { token: s.systemKey, body: { query: '{ me { isSuperAdmin } }' } });
  t.is(gql.status, 200);
  t.true(gql.body.data.me.isSuperAdmin);
  const session = await s.request('POST', '/v1/sessions', {
    token: s.systemKey,
    body: { userId: user.id, expires: new Date(Date.now() + 60_000).toISOString() },
  });
  t.is(session.status, 201);
  const audit = await s.request('POST', '/v1/internal/audit', {
    token: s.systemKey,
    body: { event_type: 'login', user_id: user.id },
  });
  t.is(audit.status, 201);
});

test('non-allowlisted routes refuse the system key with 403, access-control routes included', async (t) => {
  const s = stack();
  const probes: Array<[string, string]> = [
    ['GET', '/v1/roles'],
    ['POST', '/v1/roles'],
    ['GET', '/v1/permissions'],
    ['GET', '/v1/api-keys'],
    ['POST', '/v1/api-keys'],
    ['GET', '/v1/oauth/clients'],
    ['GET', '/v1/oauth/clients/all'],
    ['GET', '/v1/oauth/authorize'],
    ['POST', '/v1/oauth/token'],
    ['GET', '/v1/users/me/consents'],
    ['GET', '/v1/sessionsx'],
    ['POST', '/v1/internal/audit/extra'],
    ['GET', '/v1/users/oauth/extra'],
    ['GET', '/v1/auth/register'],
    ['GET', '/v1/gql/extra'],
    ['GET', '/v1'],
    ['GET', '/health'],
  ];
  for (const [method, path] of probes) {
    const r = await s.request(method, path, { token: s.systemKey, body: method === 'POST' ? {} : undefined });
    t.is(r.status, 403, `${method} ${path}`);
    t.is(r.body.message, REFUSAL, `${method} ${path}`);
  }
  // The same routes answer normally for other credentials.
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  t.is((await s.request('GET', '/v1/roles', { token: admin.token })).status, 200);
});

test.serial(
  'a system key belongs to no user: owned ones lose their owner, one an owner deletion switched off works again',
  async (t) => {
    const s = stack();
    const { down, up } = await import('../../migrations/20261220000000_system_keys_ownerless');
    const owner = await createUser(s.db);
    // Stored as earlier builds could (`create-api-key --system --user`), before the constraint.
    await down(s.db);
    const live = await createKey({ userId: owner.id, system: true, name: 'owned live' });
    const killed = await createKey({ userId: owner.id, system: true, name: 'owned, owner deleted' });
    const userKey = await createKey({ userId: owner.id, scopes: ['gps:read'], name: 'user key, switched off' });
    await s.db('api_keys').whereIn('id', [killed.id, userKey.id]).update({ is_active: false, locked: true });
    await up(s.db);
    const rows = await s
      .db('api_keys')
      .whereIn('id', [live.id, killed.id, userKey.id])
      .select('id', 'user_id', 'is_active', 'locked');
    const byId = new Map(rows.map((r) => [r.id, r]));
    t.like(byId.get(live.id), { user_id: null, is_active: true, locked: false });
    t.like(byId.get(killed.id), { user_id: null, is_active: true, locked: false });
    // Only system keys change: a user key switched off stays so.
    t.like(byId.get(userKey.id), { user_id: owner.id, is_active: false, locked: true });
    const me = await s.request('POST', '/v1/gql', { token: killed.key, body: { query: '{ me { isSuperAdmin } }' } });
    t.true(me.body.data?.me?.isSuperAdmin, JSON.stringify(me.body));
    // From now on no system key can have an owner.
    const err = await t.throwsAsync(createKey({ userId: owner.id, system: true }));
    t.regex(err!.message, /api_keys_system_ownerless/);
    // The owner's deletion leaves every system key as it was.
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    t.is((await s.request('DELETE', `/v1/users/${owner.id}`, { token: admin.token })).status, 204);
    const after = await s.request('POST', '/v1/gql', { token: live.key, body: { query: '{ me { isSuperAdmin } }' } });
    t.true(after.body.data?.me?.isSuperAdmin, JSON.stringify(after.body));
  },
);
