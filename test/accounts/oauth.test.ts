import test from 'ava';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { fewestStatements, statementsOn } from '../helpers/statements';

const stack = useStack(test);
let n = 0;
const uniq = () => `${Date.now().toString(36)}${n++}`;
const FLAT = [
  'avatar_url',
  'created_at',
  'email',
  'id',
  'is_banned',
  'last_login_at',
  'platform',
  'primary_platform_account_id',
  'privacy_mode',
  'updated_at',
  'username',
];

test('POST /v1/users/oauth: only the system key (everyone else 401)', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const key = await createKey({ userId: admin.id, scopes: ['*:*'] });
  const body = { email: null, name: 'X', oauthProvider: 'github', oauthProviderId: uniq() };
  t.is((await s.request('POST', '/v1/users/oauth', { body })).status, 401);
  t.is((await s.request('POST', '/v1/users/oauth', { token: admin.token, body })).status, 401);
  t.is((await s.request('POST', '/v1/users/oauth', { token: key.key, body })).status, 401);
});

test('first provider sign-in creates a User-role user; the next one updates the same account', async (t) => {
  const s = stack();
  const id = uniq();
  const first = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: {
      email: `Chat_${id}@Example.test`,
      name: 'Chat Person!',
      oauthProvider: 'chat',
      oauthProviderId: `c-${id}`,
      image: 'https://cdn.example.test/1.png',
    },
  });
  t.is(first.status, 200, first.text);
  t.deepEqual(Object.keys(first.body.data).sort(), FLAT);
  t.is(first.body.data.email, `chat_${id}@example.test`);
  t.is(first.body.data.platform, 'chat');
  t.is(first.body.data.avatar_url, 'https://cdn.example.test/1.png');
  t.regex(first.body.data.username, /^Chat_Person/);
  t.truthy(first.body.data.last_login_at);
  t.deepEqual(await s.db('user_roles').where('user_id', first.body.data.id).pluck('role_id'), ['role_user']);
  t.truthy(await s.db('audit_events').where({ user_id: first.body.data.id, event_type: 'user_created' }).first());

  const second = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: {
      email: `chat_${id}@example.test`,
      name: 'Renamed',
      oauthProvider: 'chat',
      oauthProviderId: `c-${id}`,
      image: null,
    },
  });
  t.is(second.body.data.id, first.body.data.id);
  t.is(second.body.data.avatar_url, null);
  const accounts = await s.db('platform_accounts').where('user_id', first.body.data.id);
  t.is(accounts.length, 1);
  t.is(accounts[0].username, 'Renamed');
});

test.serial('a provider sign-in with the email of an existing user links to that user', async (t) => {
  const s = stack();
  const existing = await createUser(s.db);
  const { result: r, sql } = await statementsOn(s.db, 'audit_events', () =>
    s.request('POST', '/v1/users/oauth', {
      token: s.systemKey,
      body: {
        email: existing.email.toUpperCase(),
        name: 'Same Person',
        oauthProvider: 'stream',
        oauthProviderId: `s-${uniq()}`,
      },
    }),
  );
  t.is(r.status, 200);
  t.is(r.body.data.id, existing.id);
  // account_linked and login: one INSERT for both.
  t.is(sql.filter((q) => /insert into "?audit_events/i.test(q)).length, 1, sql.join('\n'));
  t.deepEqual(
    (await s.db('audit_events').where({ user_id: existing.id }).whereIn('event_type', ['account_linked', 'login']))
      .map((e) => e.event_type)
      .sort(),
    ['account_linked', 'login'],
  );
  t.is(r.body.data.platform, 'email'); // the primary account stays the email one
  const accounts = await s
    .db('platform_accounts as pa')
    .join('platforms as p', 'p.id', 'pa.platform_id')
    .where('pa.user_id', existing.id)
    .pluck('p.slug');
  t.deepEqual(accounts.sort(), ['email', 'stream']);
  t.truthy(await s.db('audit_events').where({ user_id: existing.id, event_type: 'account_linked' }).first());
});

test('refusals: unknown platform 400, the email platform 400, a deleted user 403, bad body 400', async (t) => {
  const s = stack();
  const unknown = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { email: null, name: 'X', oauthProvider: 'myspace', oauthProviderId: '1' },
  });
  t.is(unknown.status, 400);
  t.regex(unknown.body.message, /^oauthProvider/);
  t.is(
    (
      await s.request('POST', '/v1/users/oauth', {
        token: s.systemKey,
        body: { email: null, name: 'X', oauthProvider: 'email', oauthProviderId: '1' },
      })
    ).status,
    400,
  );
  const missing = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { email: null, oauthProvider: 'github', oauthProviderId: '1' },
  });
  t.is(missing.status, 400);
  t.regex(missing.body.message, /^name/);
  const pid = `gh-${uniq()}`;
  const created = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { email: null, name: 'Gone', oauthProvider: 'github', oauthProviderId: pid },
  });
  await s.db('users').where('id', created.body.data.id).update({ deleted_at: new Date() });
  t.is(
    (
      await s.request('POST', '/v1/users/oauth', {
        token: s.systemKey,
        body: { email: null, name: 'Gone', oauthProvider: 'github', oauthProviderId: pid },
      })
    ).status,
    403,
  );
});

test('a banned user still resolves, flagged is_banned', async (t) => {
  const s = stack();
  const pid = `gh-${uniq()}`;
  const created = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { email: null, name: 'Banned', oauthProvider: 'github', oauthProviderId: pid },
  });
  await s.db('bans').insert({ user_id: created.body.data.id, reason: 'spam', is_permanent: true });
  const again = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { email: null, name: 'Banned', oauthProvider: 'github', oauthProviderId: pid },
  });
  t.true(again.body.data.is_banned);
});

test('GET /v1/users/email/{email}: 401 without auth, 403 for another user, 404 unknown, own and system lookups work', async (t) => {
  const s = stack();
  const me = await createUser(s.db);
  const other = await createUser(s.db);
  t.is((await s.request('GET', `/v1/users/email/${encodeURIComponent(me.email)}`)).status, 401);
  t.is(
    (await s.request('GET', `/v1/users/email/${encodeURIComponent(me.email)}`, { token: 'sess_bogus' })).status,
    401,
  );
  const own = await s.request('GET', `/v1/users/email/${encodeURIComponent(me.email.toUpperCase())}`, {
    token: me.token,
  });
  t.is(own.status, 200);
  t.deepEqual(Object.keys(own.body.data).sort(), FLAT);
  t.is(own.body.data.id, me.id);
  const theirs = await s.request('GET', `/v1/users/email/${encodeURIComponent(other.email)}`, { token: me.token });
  t.is(theirs.status, 403);
  // Unknown addresses are 403 too for regular users: nothing is learnt about other addresses.
  t.is((await s.request('GET', '/v1/users/email/nobody%40example.test', { token: me.token })).status, 403);
  // Spec §4.11: only the system key looks up any address; an admin's users:read does not widen it.
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  t.is(
    (await s.request('GET', `/v1/users/email/${encodeURIComponent(other.email)}`, { token: admin.token })).status,
    403,
  );
  t.is(
    (await s.request('GET', `/v1/users/email/${encodeURIComponent(admin.email)}`, { token: admin.token })).status,
    200,
  );
  const sys = await s.request('GET', `/v1/users/email/${encodeURIComponent(other.email)}`, { token: s.systemKey });
  t.is(sys.status, 200);
  t.is(sys.body.data.id, other.id);
  t.is((await s.request('GET', '/v1/users/email/nobody%40example.test', { token: s.systemKey })).status, 404);
  t.is((await s.request('GET', '/v1/users/email/not-an-email', { token: s.systemKey })).status, 400);
  // A provider's address longer than mail servers take (kept as sent) can still be looked up.
  const long = `${'a'.repeat(64)}@${'b'.repeat(190)}.example.test`;
  t.true(long.length > 254);
  const created = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { email: long, name: 'Long', oauthProvider: 'github', oauthProviderId: `gh-long-${Date.now()}` },
  });
  t.is(created.status, 200, created.text);
  const found = await s.request('GET', `/v1/users/email/${encodeURIComponent(long)}`, { token: s.systemKey });
  t.is(found.status, 200, found.text);
  t.is(found.body.data.id, created.body.data.id);
});

test.serial(
  'GET /v1/users/email/{email}: the email platform account wins, deleted users are skipped, one statement per lookup',
  async (t) => {
    const s = stack();
    const address = `shared-${uniq()}@example.test`;
    // An older account on another platform with the same address (other case), on another user.
    const other = await createUser(s.db);
    const github = await s.db('platforms').where('slug', 'github').first('id');
    await s.db('platform_accounts').insert({
      user_id: other.id,
      platform_id: github.id,
      platform_user_id: `gh-${uniq()}`,
      is_oauth: true,
      is_primary: false,
      email: address.toUpperCase(),
      email_verified_at: new Date(),
      created_at: new Date(Date.now() - 86_400_000),
    });
    const owner = await createUser(s.db, { email: address });
    const lookup = (email: string) =>
      s.request('GET', `/v1/users/email/${encodeURIComponent(email)}`, { token: s.systemKey });

    await lookup(address); // warm: the system key's credential is cached from here on
    // Serial, so no other test's requests run meanwhile.
    t.is(
      await fewestStatements(s, async () => {
        const found = await lookup(address);
        t.is(found.status, 200);
        t.is(found.body.data.id, owner.id);
        t.is(found.body.data.email, address);
      }),
      1,
    );

    // Concurrent lookups of different addresses share a statement and each gets its own user.
    const [a, b, none] = await Promise.all([
      lookup(other.email),
      lookup(address),
      lookup(`nobody-${uniq()}@example.test`),
    ]);
    t.is(a.body.data.id, other.id);
    t.is(b.body.data.id, owner.id);
    t.is(none.status, 404);

    // With the email platform's user deleted, the address belongs to the other platform's account.
    await s.db('users').where('id', owner.id).update({ deleted_at: new Date() });
    const after = await lookup(address);
    t.is(after.status, 200);
    t.is(after.body.data.id, other.id);
  },
);

test('GraphQL: platforms (anonymous), oauthSignin (system key only), findUserByPlatform', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const platforms = await s.request('POST', '/v1/gql', {
    body: { query: '{ platforms { slug name twoFactorSupported twoFactorRequired } }' },
  });
  t.true(platforms.body.data.platforms.some((p: any) => p.slug === 'email' && p.twoFactorSupported === true));
  const pid = `gql-${uniq()}`;
  const mutation = {
    query: 'mutation($i: OauthSigninInput!) { oauthSignin(input: $i) { id username platform isBanned email } }',
    variables: { i: { email: null, name: 'Gql Person', oauthProvider: 'github', oauthProviderId: pid } },
  };
  const denied = await s.request('POST', '/v1/gql', { token: user.token, body: mutation });
  t.is(denied.body.errors[0].extensions.status, 401);
  const ok = await s.request('POST', '/v1/gql', { token: s.systemKey, body: mutation });
  t.falsy(ok.body.errors, JSON.stringify(ok.body.errors));
  t.is(ok.body.data.oauthSignin.platform, 'github');
  t.false(ok.body.data.oauthSignin.isBanned);
  const bad = await s.request('POST', '/v1/gql', {
    token: s.systemKey,
    body: { ...mutation, variables: { i: { ...mutation.variables.i, name: '' } } },
  });
  t.is(bad.body.errors[0].extensions.status, 400);
  const find = {
    query: 'query($s: String!, $p: String!) { findUserByPlatform(platformSlug: $s, platformUserId: $p) }',
    variables: { s: 'github', p: pid },
  };
  t.is(
    (await s.request('POST', '/v1/gql', { token: s.systemKey, body: find })).body.data.findUserByPlatform,
    ok.body.data.oauthSignin.id,
  );
  t.is((await s.request('POST', '/v1/gql', { token: user.token, body: find })).body.errors[0].extensions.status, 403);
  t.is(
    (
      await s.request('POST', '/v1/gql', {
        token: s.systemKey,
        body: { ...find, variables: { s: 'github', p: 'nobody' } },
      })
    ).body.data.findUserByPlatform,
    null,
  );
  // Aliases share one statement (a document of many lookups held the pool one connection each).
  const aliases = Array.from(
    { length: 50 },
    (_, i) => `a${i}: findUserByPlatform(platformSlug: "github", platformUserId: "${i === 7 ? pid : `none-${i}`}")`,
  );
  const many = await statementsOn(s.db, 'platform_accounts', () =>
    s.request('POST', '/v1/gql', { token: s.systemKey, body: { query: `{ ${aliases.join(' ')} }` } }),
  );
  t.falsy(many.result.body.errors, JSON.stringify(many.result.body.errors));
  t.is(many.result.body.data.a7, ok.body.data.oauthSignin.id);
  t.is(many.result.body.data.a8, null);
  // (A few statements, not one each: the gates before a resolver may spread them over some turns.)
  t.true(many.count <= 5, `${many.count} statements for 50 lookups`);
});

test('first sign-ins at the same time: one provider account makes one user; one address across providers makes one user', async (t) => {
  const s = stack();
  const signIn = (body: Record<string, unknown>) => s.request('POST', '/v1/users/oauth', { token: s.systemKey, body });
  // The same provider account, ten times at once (a double-submitting app): the same user each time.
  const id = uniq();
  const same = await Promise.all(
    Array.from({ length: 10 }, () =>
      signIn({ email: null, name: `Dup ${id}`, oauthProvider: 'github', oauthProviderId: `gh-${id}` }),
    ),
  );
  t.deepEqual(
    same.map((r) => r.status),
    Array(10).fill(200),
    JSON.stringify(same.map((r) => r.text)),
  );
  t.is(new Set(same.map((r) => r.body.data.id)).size, 1);
  // One new verified address from three providers at once: one user holding three accounts.
  const email = `race_${uniq()}@example.test`;
  const mixed = await Promise.all(
    ['github', 'google', 'chat'].map((p) =>
      signIn({ email, name: `Race ${p}`, oauthProvider: p, oauthProviderId: `${p}-${uniq()}` }),
    ),
  );
  t.deepEqual(
    mixed.map((r) => r.status),
    [200, 200, 200],
    JSON.stringify(mixed.map((r) => r.text)),
  );
  t.is(new Set(mixed.map((r) => r.body.data.id)).size, 1);
  const owners = await s.db('platform_accounts').whereRaw('lower(email) = ?', [email]).distinct('user_id');
  t.is(owners.length, 1);
});

test('different people with one name signing in for the first time at once each get a user', async (t) => {
  const s = stack();
  const name = `Same Name ${uniq()}`;
  const answers = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      s.request('POST', '/v1/users/oauth', {
        token: s.systemKey,
        body: { email: null, name, oauthProvider: 'github', oauthProviderId: `same-${uniq()}-${i}` },
      }),
    ),
  );
  t.deepEqual(
    answers.map((r) => r.status),
    Array(8).fill(200),
    JSON.stringify(answers.map((r) => r.text)),
  );
  t.is(new Set(answers.map((r) => r.body.data.id)).size, 8);
  t.is(new Set(answers.map((r) => r.body.data.username.toLowerCase())).size, 8);
});

test('two users given one address at the same time: one of them gets it', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  for (let round = 0; round < 3; round++) {
    // Provider-only users: their address is typed in through PATCH, not an email sign-in.
    const made = await Promise.all(
      [0, 1].map((i) =>
        s.request('POST', '/v1/users/oauth', {
          token: s.systemKey,
          body: { email: null, name: `Addr ${i}`, oauthProvider: 'github', oauthProviderId: `addr-${uniq()}` },
        }),
      ),
    );
    const email = `shared_${uniq()}@example.test`;
    const answers = await Promise.all(
      made.map((m) => s.request('PATCH', `/v1/users/${m.body.data.id}`, { token: admin.token, body: { email } })),
    );
    t.deepEqual(answers.map((r) => r.status).sort(), [200, 409], JSON.stringify(answers.map((r) => r.text)));
  }
});

test('a username made from a name keeps the letters of accented ones (Zoë Ünïcödé → Zoe_Unicode)', async (t) => {
  const s = stack();
  const signin = (name: string) =>
    s.request('POST', '/v1/users/oauth', {
      token: s.systemKey,
      body: { email: null, name, oauthProvider: 'github', oauthProviderId: uniq() },
    });
  const accented = await signin('Zoë Ünïcödé');
  t.is(accented.status, 200, accented.text);
  t.regex(accented.body.data.username, /^Zoe_Unicode(_[0-9a-f]{6})?$/);
  const decomposed = await signin('Jose\u0301 Mu\u0308ller');
  t.regex(decomposed.body.data.username, /^Jose_Muller(_[0-9a-f]{6})?$/);
});
