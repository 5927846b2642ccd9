import test from 'ava';
import { randomUUID } from 'node:crypto';
import { signAppAssertion } from '../../shared/auth/assertionVerifier';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const ID_SECRET = 'audit-id-app-secret-000';
const OTHER_SECRET = 'audit-other-app-secret-111';
const stack = useStack(test, { env: { ID_APPS: `idapp:${ID_SECRET},otherapp:${OTHER_SECRET}` } });
const FIELDS = [
  'id',
  'user_id',
  'event_type',
  'resource_type',
  'resource_id',
  'actor_id',
  'ip_address',
  'user_agent',
  'description',
  'metadata',
  'status',
  'error_message',
  'country_code',
  'country_name',
  'city',
  'region',
  'source_service',
  'created_at',
  'is_reported',
].sort();

const post = (body: unknown, headers: Record<string, string> = {}, token?: string) =>
  stack().request('POST', '/v1/internal/audit', { body, headers, token });

test('an internal app writes with X-ID-App-Key: 201 with the audit event; a wrong key is 401', async (t) => {
  const r = await post(
    {
      event_type: 'login',
      status: 'success',
      source_service: 'id',
      metadata: { step: 'password' },
      description: 'sign-in page',
    },
    { 'x-id-app-key': ID_SECRET },
  );
  t.is(r.status, 201, r.text);
  t.deepEqual(Object.keys(r.body.data).sort(), FIELDS);
  t.is(r.body.data.event_type, 'login');
  t.is(r.body.data.user_id, null);
  t.is(r.body.data.source_service, 'id');
  t.deepEqual(r.body.data.metadata, { step: 'password' });
  t.false(r.body.data.is_reported);
  const row = await stack().db('audit_events').where('id', r.body.data.id).first();
  t.is(row.description, 'sign-in page');

  const bad = await post({ event_type: 'login' }, { 'x-id-app-key': 'not-the-secret' });
  t.is(bad.status, 401);
  t.deepEqual(Object.keys(bad.body).sort(), ['error', 'message']);
});

test('without an app key or audit:write: 401 anonymously (before any validation), 403 without the permission', async (t) => {
  const s = stack();
  t.is((await post({ event_type: 'login' })).status, 401);
  t.is((await post({})).status, 401);
  const user = await createUser(s.db, { roles: ['role_user'] });
  t.is((await post({ event_type: 'login' }, {}, user.token)).status, 403);
  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  t.is((await post({ event_type: 'login' }, {}, key.key)).status, 403);
});

test('audit:write holders and the system key write for any user without an assertion', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const target = await createUser(s.db);
  const byAdmin = await post(
    {
      user_id: target.id,
      event_type: 'password_changed',
      actor_id: admin.id,
      resource_type: 'user',
      resource_id: target.id,
    },
    {},
    admin.token,
  );
  t.is(byAdmin.status, 201, byAdmin.text);
  t.is(byAdmin.body.data.user_id, target.id);
  t.is(byAdmin.body.data.actor_id, admin.id);
  const bySystem = await post(
    {
      user_id: target.id,
      event_type: 'logout',
      status: 'failure',
      error_message: 'token expired',
      ip_address: '203.0.113.9',
      user_agent: 'bot/1.0',
    },
    {},
    s.systemKey,
  );
  t.is(bySystem.status, 201, bySystem.text);
  t.is(bySystem.body.data.status, 'failure');
  t.is(bySystem.body.data.ip_address, '203.0.113.9');
});

test('user_id and actor_id are validated: 400 for unknown ids; services other than api may use external ids', async (t) => {
  const s = stack();
  const unknown = randomUUID();
  const u = await post({ user_id: unknown, event_type: 'login' }, {}, s.systemKey);
  t.is(u.status, 400);
  t.regex(u.body.message, /user_id/);
  t.is(
    (await post({ user_id: 'not-a-uuid', event_type: 'login', source_service: 'api' }, {}, s.systemKey)).status,
    400,
  );
  const bot = await post(
    {
      user_id: '123456789012345678',
      event_type: 'bot_command_executed',
      source_service: 'chat_bot',
      metadata: { command: '/ping' },
    },
    {},
    s.systemKey,
  );
  t.is(bot.status, 201, bot.text);
  t.is(bot.body.data.user_id, '123456789012345678');
  const a = await post({ event_type: 'login', actor_id: unknown }, {}, s.systemKey);
  t.is(a.status, 400);
  t.regex(a.body.message, /actor_id/);
  const a2 = await post(
    { event_type: 'bot_guild_configured', source_service: 'chat_bot', actor_id: 'external' },
    {},
    s.systemKey,
  );
  t.is(a2.status, 400);
  t.is((await post({ event_type: 'made_up' }, {}, s.systemKey)).status, 400);
  t.is((await post({ event_type: 'login', status: 'maybe' }, {}, s.systemKey)).status, 400);
  t.is((await post({ event_type: 'login', source_service: 'elsewhere' }, {}, s.systemKey)).status, 400);
});

test('ip_address must be an IP address: any other text is a 400 naming it, and nothing is stored', async (t) => {
  const s = stack();
  const body = (ip_address: unknown) => ({
    event_type: 'login',
    source_service: 'chat_bot',
    user_id: 'ext-ip-check',
    ip_address,
  });
  for (const ip of ['not an ip\r\nforged', '１.２.３.４', '1.2.3.4%eth0', 'fe80::1%eth0', ' 1.2.3.4', '']) {
    const r = await post(body(ip), {}, s.systemKey);
    t.is(r.status, 400, JSON.stringify(ip));
    t.regex(r.body.message, /^ip_address: must be an IP address/, JSON.stringify(ip));
    t.is(r.body.details[0].field, 'ip_address');
  }
  t.is(Number((await s.db('audit_events').where('user_id', 'ext-ip-check').count({ n: '*' }))[0].n), 0);
  // An IPv4-mapped address is stored as the IPv4 address it is (shared/ipAddress.ts).
  for (const [ip, stored] of [
    ['203.0.113.9', '203.0.113.9'],
    ['2001:db8::1', '2001:db8::1'],
    ['::ffff:203.0.113.9', '203.0.113.9'],
    [null, null],
  ]) {
    const r = await post(body(ip), {}, s.systemKey);
    t.is(r.status, 201, r.text);
    t.is(r.body.data.ip_address, stored);
  }
});

test("an app attributing an event to an end user needs that user's assertion from the same app", async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const other = await createUser(s.db);
  const body = { user_id: user.id, event_type: 'logout', source_service: 'id' };
  const key = { 'x-id-app-key': ID_SECRET };
  const none = await post(body, key);
  t.is(none.status, 401);
  t.regex(none.body.message, /X-ID-App-Assertion/);
  const wrongSubject = await post(body, {
    ...key,
    'x-id-app-assertion': signAppAssertion({ appId: 'idapp', secret: ID_SECRET, subject: other.id }),
  });
  t.is(wrongSubject.status, 401);
  t.regex(wrongSubject.body.message, /subject/);
  const otherApp = await post(body, {
    ...key,
    'x-id-app-assertion': signAppAssertion({ appId: 'otherapp', secret: OTHER_SECRET, subject: user.id }),
  });
  t.is(otherApp.status, 401);
  const stale = await post(body, {
    ...key,
    'x-id-app-assertion': signAppAssertion({
      appId: 'idapp',
      secret: ID_SECRET,
      subject: user.id,
      issuedAt: Math.floor(Date.now() / 1000) - 120,
    }),
  });
  t.is(stale.status, 401);

  const assertion = signAppAssertion({ appId: 'idapp', secret: ID_SECRET, subject: user.id });
  const ok = await post(body, { ...key, 'x-id-app-assertion': assertion });
  t.is(ok.status, 201, ok.text);
  t.is(ok.body.data.user_id, user.id);
  const replay = await post(body, { ...key, 'x-id-app-assertion': assertion });
  t.is(replay.status, 401);
  t.regex(replay.body.message, /already used/);
});

test("an app naming an end user as actor_id needs that user's assertion too; one assertion cannot vouch for two users", async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const other = await createUser(s.db);
  const key = { 'x-id-app-key': ID_SECRET };
  const asUser = () => ({
    ...key,
    'x-id-app-assertion': signAppAssertion({ appId: 'idapp', secret: ID_SECRET, subject: user.id }),
  });
  const body = {
    actor_id: user.id,
    event_type: 'password_changed',
    resource_type: 'user',
    resource_id: user.id,
    source_service: 'id',
  };

  const none = await post(body, key);
  t.is(none.status, 401);
  t.deepEqual(Object.keys(none.body).sort(), ['error', 'message']);
  t.regex(none.body.message, /X-ID-App-Assertion/);
  const otherSubject = await post(body, {
    ...key,
    'x-id-app-assertion': signAppAssertion({ appId: 'idapp', secret: ID_SECRET, subject: other.id }),
  });
  t.is(otherSubject.status, 401);
  t.regex(otherSubject.body.message, /subject does not match actor_id/);
  const otherApp = await post(body, {
    ...key,
    'x-id-app-assertion': signAppAssertion({ appId: 'otherapp', secret: OTHER_SECRET, subject: user.id }),
  });
  t.is(otherApp.status, 401);
  const ok = await post(body, asUser());
  t.is(ok.status, 201, ok.text);
  t.like(ok.body.data, { user_id: null, actor_id: user.id });

  // The same user in both fields (any case): one assertion for that user.
  const both = await post({ ...body, user_id: user.id.toUpperCase() }, asUser());
  t.is(both.status, 201, both.text);
  t.like(both.body.data, { user_id: user.id, actor_id: user.id });

  // Two different users: refused whoever the assertion names, and the assertion is not spent on it.
  const assertion = asUser();
  const two = await post({ ...body, user_id: other.id }, assertion);
  t.is(two.status, 403);
  t.deepEqual(Object.keys(two.body).sort(), ['error', 'message']);
  t.regex(two.body.message, /different users/);
  t.is((await post(body, assertion)).status, 201);
  // An audit:write credential may still name both.
  t.is((await post({ ...body, user_id: other.id }, {}, s.systemKey)).status, 201);
});
