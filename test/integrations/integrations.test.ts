import test from 'ava';
import { unsealToken } from '../../shared/commands/integrationTokens';
import { sha256 } from '../../shared/crypto';
import { redisKey, RedisKeys } from '../../shared/redis';
import { createKey, createUser, TestUser } from '../helpers/factories';
import { FakeUser, fakeUser, useStreamPlatformStack } from '../helpers/fakeStreamPlatform';

/**
 * Stream-platform integrations (spec §4.25) against a local Twitch-compatible platform: the OAuth
 * connect with its single-use state, tokens sealed at rest and never shown, stats with one
 * refresh-and-retry, refresh, stream status, disconnect with revocation, 502 on upstream failure or
 * timeout, and the scheduled refresh.
 */

const { stack, fake } = useStreamPlatformStack(test);

const REDIRECT = 'https://app.example.test/integrations/done?tab=stream';

/** Every body and Location the service answered, to look for tokens in. */
const answered: string[] = [];

async function call(method: string, path: string, opts: { token?: string; body?: unknown } = {}) {
  const headers: Record<string, string> = {};
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(stack().url + path, {
    method,
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    redirect: 'manual',
  });
  const text = await res.text();
  answered.push(text, res.headers.get('location') ?? '');
  let body: any;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = text;
  }
  return { status: res.status, body, text, location: res.headers.get('location'), headers: res.headers };
}

function platformUser(overrides: Partial<FakeUser> = {}): FakeUser {
  const u = fakeUser(overrides);
  fake().users.set(u.id, u);
  return u;
}

/** Connect → the platform's consent → the callback; returns the connect answer and the callback's redirect. */
async function connect(user: TestUser, pu: FakeUser, body: Record<string, unknown> = { redirect_uri: REDIRECT }) {
  const started = await call('POST', '/v1/integrations/platform/stream/connect', { token: user.token, body });
  if (started.status !== 200) throw new Error(`connect: ${started.status} ${started.text}`);
  fake().consentingUser = pu.id;
  const consent = await fake().consent(started.body.authorization_url);
  const callbackPath = `${consent.location.pathname}?${consent.location.searchParams.toString()}`;
  const cb = await call('GET', callbackPath);
  return { started: started.body, consent, callbackPath, cb, redirect: cb.location ? new URL(cb.location) : null };
}

async function connected(user: TestUser, pu: FakeUser): Promise<string> {
  const { redirect } = await connect(user, pu);
  const id = redirect?.searchParams.get('integration_id');
  if (!id) throw new Error(`no integration: ${redirect}`);
  return id;
}

/** Opens a sealed column the way the service does (shared/crypto.ts through the integration commands). */
const unseal = (sealed: string) => unsealToken(stack().api.services, sealed);

const countFor = async (userId: string) =>
  Number((await stack().db('integrations').where('user_id', userId).count({ n: '*' }).first())!.n);

test.serial('platforms and scopes: the stream platform is enabled, with features and required scopes', async (t) => {
  const u = await createUser(stack().db);
  const p = await call('GET', '/v1/integrations/platforms', { token: u.token });
  t.is(p.status, 200);
  t.deepEqual(
    p.body.platforms.map((x: any) => [x.slug, x.enabled]),
    [['stream', true]],
  );
  t.true(p.body.platforms[0].features.includes('channel_stats'));
  const s = await call('GET', '/v1/integrations/platform/stream/scopes', { token: u.token });
  t.is(s.body.platform, 'stream');
  const required = s.body.scopes.filter((x: any) => x.required).map((x: any) => x.name);
  t.deepEqual(required.sort(), ['channel:read:subscriptions', 'moderator:read:followers']);
  t.true(s.body.scopes.every((x: any) => typeof x.description === 'string'));
  t.is((await call('GET', '/v1/integrations/platform/nope/scopes', { token: u.token })).status, 404);
  t.is((await call('GET', '/v1/integrations/platforms')).status, 401);
});

test.serial('connect → consent → callback creates the integration; tokens sealed in the database', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const pu = platformUser({ followers: 10 });
  const { started, consent, cb, redirect } = await connect(u, pu, { redirect_uri: REDIRECT, scopes: ['chat:read'] });

  const auth = new URL(started.authorization_url);
  t.is(`${auth.origin}${auth.pathname}`, `${fake().authUrl}/authorize`);
  t.is(auth.searchParams.get('client_id'), fake().clientId);
  t.is(auth.searchParams.get('response_type'), 'code');
  t.is(auth.searchParams.get('state'), started.state);
  // The platform's consent screen is always shown (a link started by someone else never passes silently).
  t.is(auth.searchParams.get('force_verify'), 'true');
  t.is(auth.searchParams.get('redirect_uri'), `${s.config.appUrl}/v1/integrations/callback/stream`);
  t.deepEqual(auth.searchParams.get('scope')!.split(' ').sort(), [
    'channel:read:subscriptions',
    'chat:read',
    'moderator:read:followers',
  ]);
  t.is(consent.state, started.state);
  // The state was spent by the callback.
  t.is(await s.redis.exists(redisKey(s.config, RedisKeys.integrationState(sha256(started.state)))), 0);

  t.is(cb.status, 302);
  // A bare redirect, as the document declares it: no "Redirecting to …" page.
  t.is(cb.text, '');
  t.is(cb.headers.get('content-type'), null);
  t.is(cb.headers.get('content-length'), '0');
  t.is(`${redirect!.origin}${redirect!.pathname}`, 'https://app.example.test/integrations/done');
  t.is(redirect!.searchParams.get('tab'), 'stream');
  const id = redirect!.searchParams.get('integration_id')!;
  t.truthy(id);

  const got = await call('GET', `/v1/integrations/${id}`, { token: u.token });
  t.is(got.status, 200);
  t.like(got.body.data, {
    id,
    user_id: u.id,
    platform_slug: 'stream',
    platform_name: 'Stream',
    platform_user_id: pu.id,
    username: pu.login,
    display_name: pu.display_name,
    profile_image_url: pu.profile_image_url,
    is_active: true,
    bot_status: 'active',
  });
  t.deepEqual(got.body.data.scopes.sort(), ['channel:read:subscriptions', 'chat:read', 'moderator:read:followers']);
  t.truthy(got.body.data.connected_at);
  t.falsy(Object.keys(got.body.data).find((k) => /token/i.test(k)));

  const row = await s.db('integrations').where('id', id).first();
  const access = unseal(row.access_token_sealed);
  t.true(fake().accessTokens.has(access));
  t.true(fake().refreshTokens.has(unseal(row.refresh_token_sealed)));
  const dump = JSON.stringify(row);
  for (const tok of fake().issued) t.false(dump.includes(tok), 'a token in clear in the database');
  const expiresIn = (new Date(row.token_expires_at).getTime() - Date.now()) / 1000;
  t.true(expiresIn > fake().expiresIn - 60 && expiresIn <= fake().expiresIn);

  const audit = await s.db('audit_events').where({ resource_id: id, event_type: 'account_linked' }).first();
  t.is(audit?.user_id, u.id);
  t.is(audit?.resource_type, 'integration');

  const list = await call('GET', '/v1/integrations', { token: u.token });
  // Bare arrays (spec §4.25), no {data, _links} wrapper.
  t.true(Array.isArray(list.body), list.text);
  t.deepEqual(
    list.body.map((i: any) => i.id),
    [id],
  );
  const per = await call('GET', '/v1/integrations/platform/stream', { token: u.token });
  t.true(Array.isArray(per.body), per.text);
  t.deepEqual(
    per.body.map((i: any) => i.id),
    [id],
  );
  t.is((await call('GET', '/v1/integrations/platform/nope', { token: u.token })).status, 404);
});

test.serial(
  'state is single use, bound to its user and platform; forged or expired states write nothing',
  async (t) => {
    const s = stack();
    const u = await createUser(s.db);
    const other = await createUser(s.db);
    const pu = platformUser();
    const first = await connect(u, pu);
    t.is(first.cb.status, 302);
    t.is(await countFor(u.id), 1);

    // The same callback again (replayed state): refused, nothing new.
    const replay = await call('GET', first.callbackPath);
    t.is(replay.status, 400);
    t.is(replay.body.error, 'BadRequest');
    t.regex(replay.body.message, /state/);

    // A forged state.
    const forged = await call('GET', '/v1/integrations/callback/stream?code=abc&state=forged-state-value');
    t.is(forged.status, 400);
    t.is((await call('GET', '/v1/integrations/callback/stream?code=abc')).status, 400);

    // A state taken to another platform's callback is spent and refused.
    const started = await call('POST', '/v1/integrations/platform/stream/connect', {
      token: u.token,
      body: { redirect_uri: REDIRECT },
    });
    fake().consentingUser = platformUser().id;
    const c = await fake().consent(started.body.authorization_url);
    t.is((await call('GET', `/v1/integrations/callback/other?code=${c.code}&state=${c.state}`)).status, 400);
    t.is((await call('GET', `/v1/integrations/callback/stream?code=${c.code}&state=${c.state}`)).status, 400);

    // An expired state (Redis dropped it after its 10 minutes).
    const late = await call('POST', '/v1/integrations/platform/stream/connect', {
      token: u.token,
      body: { redirect_uri: REDIRECT },
    });
    const key = redisKey(s.config, RedisKeys.integrationState(sha256(late.body.state)));
    const ttl = await s.redis.ttl(key);
    t.true(ttl > 590 && ttl <= 600, `ttl ${ttl}`);
    await s.redis.del(key);
    const l = await fake().consent(late.body.authorization_url);
    t.is((await call('GET', `/v1/integrations/callback/stream?code=${l.code}&state=${l.state}`)).status, 400);

    // A Bearer credential of another user sent with the callback: refused.
    const mine = await call('POST', '/v1/integrations/platform/stream/connect', {
      token: u.token,
      body: { redirect_uri: REDIRECT },
    });
    const m = await fake().consent(mine.body.authorization_url);
    const mismatch = await call('GET', `/v1/integrations/callback/stream?code=${m.code}&state=${m.state}`, {
      token: other.token,
    });
    t.is(mismatch.status, 403);
    t.is(await countFor(u.id), 1);
    t.is(await countFor(other.id), 0);

    // The same user's Bearer credential is fine.
    const again = await call('POST', '/v1/integrations/platform/stream/connect', {
      token: u.token,
      body: { redirect_uri: REDIRECT },
    });
    fake().consentingUser = platformUser().id;
    const a = await fake().consent(again.body.authorization_url);
    const ok = await call('GET', `/v1/integrations/callback/stream?code=${a.code}&state=${a.state}`, {
      token: u.token,
    });
    t.is(ok.status, 302);
    t.truthy(new URL(ok.location!).searchParams.get('integration_id'));
    t.is(await countFor(u.id), 2);
  },
);

test.serial('callback failures redirect with error and write nothing', async (t) => {
  const u = await createUser(stack().db);
  // The user denied access at the platform.
  const started = await call('POST', '/v1/integrations/platform/stream/connect', {
    token: u.token,
    body: { redirect_uri: REDIRECT },
  });
  const denied = await call(
    'GET',
    `/v1/integrations/callback/stream?error=access_denied&error_description=The+user+denied&state=${started.body.state}`,
  );
  t.is(denied.status, 302);
  t.is(denied.text, '');
  t.is(denied.headers.get('content-type'), null);
  t.is(new URL(denied.location!).searchParams.get('error'), 'access_denied');
  t.is(new URL(denied.location!).searchParams.get('integration_id'), null);

  // A code the platform refuses.
  const bad = await call('POST', '/v1/integrations/platform/stream/connect', {
    token: u.token,
    body: { redirect_uri: REDIRECT },
  });
  fake().consentingUser = platformUser().id;
  await fake().consent(bad.body.authorization_url);
  const refused = await call('GET', `/v1/integrations/callback/stream?code=not-a-code&state=${bad.body.state}`);
  t.is(refused.status, 302);
  t.is(new URL(refused.location!).searchParams.get('error'), 'invalid_grant');

  // The platform down while exchanging the code.
  const down = await call('POST', '/v1/integrations/platform/stream/connect', {
    token: u.token,
    body: { redirect_uri: REDIRECT },
  });
  const c = await fake().consent(down.body.authorization_url);
  fake().failWith.set('/oauth2/token', 503);
  try {
    const r = await call('GET', `/v1/integrations/callback/stream?code=${c.code}&state=${c.state}`);
    t.is(r.status, 302);
    t.is(new URL(r.location!).searchParams.get('error'), 'upstream_error');
  } finally {
    fake().failWith.clear();
  }
  t.is(await countFor(u.id), 0);
});

test.serial(
  'a connect whose credential was revoked or narrowed, or whose user was banned or deleted, since it began connects nothing',
  async (t) => {
    const s = stack();
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    const userRole = 'role_user';
    type Key = { id: string; key: string };
    const narrowings: Array<[string, 'session' | 'key', (u: TestUser, k: Key) => Promise<{ status: number }>]> = [
      ['banned', 'session', (u) => call('POST', `/v1/users/${u.id}/ban`, { token: admin.token, body: {} })],
      ['deleted', 'session', (u) => call('DELETE', `/v1/users/${u.id}`, { token: admin.token })],
      [
        'role taken away',
        'session',
        (u) => call('DELETE', `/v1/users/${u.id}/roles/${userRole}`, { token: admin.token }),
      ],
      ['session signed out', 'session', (u) => call('DELETE', `/v1/sessions/${u.token}`, { token: s.systemKey })],
      ['key revoked', 'key', (u, k) => call('DELETE', `/v1/api-keys/${k.id}`, { token: u.token })],
      [
        'key narrowed',
        'key',
        (u, k) => call('PATCH', `/v1/api-keys/${k.id}`, { token: u.token, body: { scopes: ['integrations:read'] } }),
      ],
    ];
    const begin = async (token: string) => {
      const started = await call('POST', '/v1/integrations/platform/stream/connect', {
        token,
        body: { redirect_uri: REDIRECT },
      });
      t.is(started.status, 200, started.text);
      fake().consentingUser = platformUser().id;
      return fake().consent(started.body.authorization_url);
    };
    const finish = (consent: { code: string | null; state: string | null }) =>
      call('GET', `/v1/integrations/callback/stream?code=${consent.code}&state=${consent.state}`);
    for (const [what, via, narrow] of narrowings) {
      const u = await createUser(s.db);
      const key = await createKey({ userId: u.id, scopes: ['integrations:write'] });
      const consent = await begin(via === 'key' ? key.key : u.token);
      const narrowed = await narrow(u, key);
      t.true(narrowed.status < 300, `${what}: ${narrowed.status}`);
      const cb = await finish(consent);
      t.is(cb.status, 302, `${what}: ${cb.text}`);
      t.is(new URL(cb.location!).searchParams.get('error'), 'access_denied', what);
      t.is(await countFor(u.id), 0, what);
      t.falsy(await s.db('audit_events').where({ user_id: u.id, event_type: 'account_linked' }).first(), what);
    }
    // A connect started with an API key whose grant still holds connects.
    const u = await createUser(s.db);
    const key = await createKey({ userId: u.id, scopes: ['integrations:write'] });
    const cb = await finish(await begin(key.key));
    t.truthy(new URL(cb.location!).searchParams.get('integration_id'), cb.location!);
  },
);

test.serial('connect validates its input and answers 404 for unknown platforms', async (t) => {
  const u = await createUser(stack().db);
  const post = (body: unknown, slug = 'stream') =>
    call('POST', `/v1/integrations/platform/${slug}/connect`, { token: u.token, body });
  const missing = await post({});
  t.is(missing.status, 400);
  t.regex(missing.body.message, /redirect_uri/);
  const js = await post({ redirect_uri: 'javascript:alert(1)' });
  t.is(js.status, 400);
  t.regex(js.body.message, /redirect_uri/);
  const scope = await post({ redirect_uri: REDIRECT, scopes: ['root:everything'] });
  t.is(scope.status, 400);
  t.regex(scope.body.message, /scopes/);
  t.is((await post({ redirect_uri: REDIRECT }, 'nope')).status, 404);
  t.is(
    (await call('POST', '/v1/integrations/platform/stream/connect', { body: { redirect_uri: REDIRECT } })).status,
    401,
  );
});

test.serial('reconnecting the same platform account re-activates the integration', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const pu = platformUser();
  const id = await connected(u, pu);
  await s.db('integrations').where('id', id).update({ is_active: false });
  const again = await connected(u, pu);
  t.is(again, id);
  t.is(await countFor(u.id), 1);
  t.true((await s.db('integrations').where('id', id).first()).is_active);
  t.truthy(await s.db('audit_events').where({ resource_id: id, event_type: 'account_reconnected' }).first());
});

test.serial('concurrent callbacks for one platform account: every one redirects, one integration', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const pu = platformUser();
  // Several consents (two tabs, a double click), their callbacks arriving at once.
  const paths: string[] = [];
  for (let i = 0; i < 5; i++) {
    const started = await call('POST', '/v1/integrations/platform/stream/connect', {
      token: u.token,
      body: { redirect_uri: REDIRECT },
    });
    fake().consentingUser = pu.id;
    const consent = await fake().consent(started.body.authorization_url);
    paths.push(`${consent.location.pathname}?${consent.location.searchParams.toString()}`);
  }
  const answers = await Promise.all(paths.map((p) => call('GET', p)));
  for (const a of answers) t.is(a.status, 302, a.text);
  const ids = answers.map((a) => new URL(a.location!).searchParams.get('integration_id'));
  t.true(
    ids.every((id) => id && id === ids[0]),
    JSON.stringify(ids),
  );
  t.is(await countFor(u.id), 1);
});

test.serial("another user's integration is a 404 on every route; narrowed credentials need the scope", async (t) => {
  const s = stack();
  const owner = await createUser(s.db);
  const other = await createUser(s.db);
  const id = await connected(owner, platformUser());
  const tok = { token: other.token };
  t.is((await call('GET', `/v1/integrations/${id}`, tok)).status, 404);
  t.is((await call('DELETE', `/v1/integrations/${id}`, tok)).status, 404);
  t.is((await call('POST', `/v1/integrations/${id}/refresh`, tok)).status, 404);
  t.is((await call('POST', `/v1/integrations/${id}/stats`, tok)).status, 404);
  t.is(
    (await call('PATCH', `/v1/integrations/${id}/stream-status`, { ...tok, body: { bot_status: 'paused' } })).status,
    404,
  );
  t.deepEqual((await call('GET', '/v1/integrations', tok)).body, []);
  t.is((await call('GET', `/v1/integrations/${id}`, { token: owner.token })).status, 200);

  const gpsKey = await createKey({ userId: owner.id, scopes: ['gps:write'] });
  t.is((await call('GET', '/v1/integrations', { token: gpsKey.key })).status, 403);
  const readKey = await createKey({ userId: owner.id, scopes: ['integrations:read'] });
  t.is((await call('GET', '/v1/integrations', { token: readKey.key })).body.length, 1);
  t.is((await call('DELETE', `/v1/integrations/${id}`, { token: readKey.key })).status, 403);
});

test.serial('stats come from the platform: followers, subscribers, live stream', async (t) => {
  const u = await createUser(stack().db);
  const pu = platformUser({
    followers: 1234,
    subscribers: 56,
    stream: { title: 'Sailing the Baltic', game_name: 'Just Chatting', viewer_count: 789 },
  });
  const id = await connected(u, pu);
  const r = await call('POST', `/v1/integrations/${id}/stats`, { token: u.token });
  t.is(r.status, 200);
  t.true(r.body.success);
  t.like(r.body.stats, {
    followers: 1234,
    subscribers: 56,
    current_viewers: 789,
    is_live: true,
    stream_title: 'Sailing the Baltic',
    game_name: 'Just Chatting',
  });
  t.true(Math.abs(new Date(r.body.stats.updated_at).getTime() - Date.now()) < 10_000);
  // Helix got the token as a Bearer header with the client id, never in a URL.
  const helix = fake().requests.filter((q) => q.path.startsWith('/helix/'));
  t.true(helix.every((q) => q.headers['client-id'] === fake().clientId));
  const urls = fake()
    .requests.map((q) => q.url)
    .join('\n');
  t.false(
    fake().issued.some((tok) => urls.includes(tok)),
    'a token in a URL',
  );

  pu.stream = null;
  const off = await call('POST', `/v1/integrations/${id}/stats`, { token: u.token });
  t.like(off.body.stats, { is_live: false, current_viewers: 0, stream_title: null, game_name: null, followers: 1234 });
});

test.serial('a token the platform rejects is refreshed once and the call retried', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const pu = platformUser({ followers: 42 });
  const id = await connected(u, pu);
  const before = await s.db('integrations').where('id', id).first();
  fake().expireAccessTokens();
  const tokenCalls = () => fake().requests.filter((q) => q.path === '/oauth2/token').length;
  const n = tokenCalls();
  const r = await call('POST', `/v1/integrations/${id}/stats`, { token: u.token });
  t.is(r.status, 200, r.text);
  t.is(r.body.stats.followers, 42);
  t.is(tokenCalls(), n + 1);
  const after = await s.db('integrations').where('id', id).first();
  t.not(after.access_token_sealed, before.access_token_sealed);
  t.not(after.refresh_token_sealed, before.refresh_token_sealed);
  t.true(fake().accessTokens.has(unseal(after.access_token_sealed)));

  // Rejected again after the refresh: a 502, and only one refresh was tried.
  fake().failWith.set('/helix/streams', 401);
  try {
    const m = tokenCalls();
    const again = await call('POST', `/v1/integrations/${id}/stats`, { token: u.token });
    t.is(again.status, 502);
    t.is(again.body.error, 'BadGateway');
    t.is(tokenCalls(), m + 1);
  } finally {
    fake().failWith.clear();
  }
});

test.serial('refresh rotates the tokens and answers expires_at; a refused refresh token deactivates', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const id = await connected(u, platformUser());
  const before = await s.db('integrations').where('id', id).first();
  const oldRefresh = unseal(before.refresh_token_sealed);
  const r = await call('POST', `/v1/integrations/${id}/refresh`, { token: u.token });
  t.is(r.status, 200);
  t.true(r.body.success);
  t.is(typeof r.body.message, 'string');
  const exp = (new Date(r.body.expires_at).getTime() - Date.now()) / 1000;
  t.true(exp > fake().expiresIn - 60 && exp <= fake().expiresIn, `expires in ${exp}`);
  t.false(fake().refreshTokens.has(oldRefresh));
  const after = await s.db('integrations').where('id', id).first();
  t.true(fake().refreshTokens.has(unseal(after.refresh_token_sealed)));
  t.true(new Date(after.last_refreshed_at) >= new Date(before.last_refreshed_at));

  // The platform forgot the refresh token (revoked by the user there).
  fake().refreshTokens.clear();
  const refused = await call('POST', `/v1/integrations/${id}/refresh`, { token: u.token });
  t.is(refused.status, 502);
  t.regex(refused.body.message, /connect/);
  t.false((await call('GET', `/v1/integrations/${id}`, { token: u.token })).body.data.is_active);
  t.is((await call('POST', `/v1/integrations/${id}/stats`, { token: u.token })).status, 409);
});

test.serial('upstream failures and timeouts are 502 {error, message}, never a hang', async (t) => {
  const u = await createUser(stack().db);
  const id = await connected(u, platformUser());
  fake().failWith.set('/helix/channels/followers', 500);
  try {
    const r = await call('POST', `/v1/integrations/${id}/stats`, { token: u.token });
    t.is(r.status, 502);
    t.is(r.body.error, 'BadGateway');
    t.regex(r.body.message, /followers/);
  } finally {
    fake().failWith.clear();
  }
  // Only a 400 on /subscriptions means "no subscribers to count" (not an affiliate); a 403 is a
  // refusal like any other, not a count of 0.
  for (const [status, expected] of [
    [400, 200],
    [403, 502],
  ] as const) {
    fake().failWith.set('/helix/subscriptions', status);
    try {
      const r = await call('POST', `/v1/integrations/${id}/stats`, { token: u.token });
      t.is(r.status, expected, `${status} on /subscriptions: ${r.text}`);
      if (expected === 200) t.is(r.body.stats.subscribers, 0);
      else t.regex(r.body.message, /subscriptions/);
    } finally {
      fake().failWith.clear();
    }
  }
  fake().hang.add('/helix/streams');
  try {
    const started = Date.now();
    const r = await call('POST', `/v1/integrations/${id}/stats`, { token: u.token });
    t.is(r.status, 502);
    t.regex(r.body.message, /did not answer within 2000 ms/);
    const elapsed = Date.now() - started;
    t.true(elapsed >= 1900 && elapsed < 10_000, `${elapsed} ms`);
  } finally {
    fake().hang.clear();
  }
  fake().hang.add('/oauth2/token');
  try {
    const r = await call('POST', `/v1/integrations/${id}/refresh`, { token: u.token });
    t.is(r.status, 502);
  } finally {
    fake().hang.clear();
  }
});

test.serial('stream-status takes active, paused or disabled; anything else is a 400', async (t) => {
  const u = await createUser(stack().db);
  const id = await connected(u, platformUser());
  const patch = (body: unknown) => call('PATCH', `/v1/integrations/${id}/stream-status`, { token: u.token, body });
  for (const status of ['paused', 'disabled', 'active', 'disabled']) {
    const r = await patch({ bot_status: status });
    t.is(r.status, 200);
    t.deepEqual(r.body, { success: true, bot_status: status });
  }
  t.is((await call('GET', `/v1/integrations/${id}`, { token: u.token })).body.data.bot_status, 'disabled');
  const bad = await patch({ bot_status: 'running' });
  t.is(bad.status, 400);
  t.regex(bad.body.message, /bot_status/);
  t.is((await patch({})).status, 400);
});

test.serial('delete revokes the token upstream and removes the integration', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const id = await connected(u, platformUser());
  const row = await s.db('integrations').where('id', id).first();
  const access = unseal(row.access_token_sealed);

  fake().failWith.set('/oauth2/revoke', 500);
  try {
    const failed = await call('DELETE', `/v1/integrations/${id}`, { token: u.token });
    t.is(failed.status, 502);
    t.is((await call('GET', `/v1/integrations/${id}`, { token: u.token })).status, 200);
  } finally {
    fake().failWith.clear();
  }

  const r = await call('DELETE', `/v1/integrations/${id}`, { token: u.token });
  t.is(r.status, 200);
  t.true(r.body.success);
  t.true(fake().revoked.includes(access));
  const revoke = fake()
    .requests.filter((q) => q.path === '/oauth2/revoke')
    .pop()!;
  t.is(new URLSearchParams(revoke.body).get('client_id'), fake().clientId);
  t.is((await call('GET', `/v1/integrations/${id}`, { token: u.token })).status, 404);
  t.truthy(await s.db('audit_events').where({ resource_id: id, event_type: 'account_unlinked' }).first());
});

test.serial('the scheduled task refreshes tokens that expire soon, and only those', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const soon = await connected(u, platformUser());
  const later = await connected(u, platformUser());
  await s
    .db('integrations')
    .where('id', soon)
    .update({ token_expires_at: new Date(Date.now() + 60_000) });
  const before = await s.db('integrations').whereIn('id', [soon, later]).orderBy('id');
  const { scheduledTasks } = await import('../../workers/processors/scheduled');
  const result = await scheduledTasks.refreshIntegrationTokens(s.api.services);
  t.true(result.refreshed >= 1, JSON.stringify(result));
  t.is(result.failed, 0);
  const after = await s.db('integrations').whereIn('id', [soon, later]).orderBy('id');
  const byId = (rows: any[], id: string) => rows.find((r) => r.id === id);
  t.not(byId(after, soon).access_token_sealed, byId(before, soon).access_token_sealed);
  t.true(new Date(byId(after, soon).token_expires_at).getTime() > Date.now() + (fake().expiresIn - 60) * 1000);
  t.is(byId(after, later).access_token_sealed, byId(before, later).access_token_sealed);
  // The stats keep working with the renewed token without another refresh.
  const n = fake().requests.filter((q) => q.path === '/oauth2/token').length;
  t.is((await call('POST', `/v1/integrations/${soon}/stats`, { token: u.token })).status, 200);
  t.is(fake().requests.filter((q) => q.path === '/oauth2/token').length, n);
});

test.serial('no token the platform issued ever appeared in an answer', (t) => {
  t.true(fake().issued.length > 10);
  const all = answered.join('\n');
  for (const tok of fake().issued) t.false(all.includes(tok), 'a platform token in a response');
});
