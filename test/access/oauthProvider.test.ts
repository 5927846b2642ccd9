import test, { type ExecutionContext } from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import { signAppAssertion } from '../../shared/auth/assertionVerifier';
import { sha256 } from '../../shared/crypto';
import { passwordResetToken } from '../helpers/accounts';
import { createKey, createUser, TestUser } from '../helpers/factories';
import { listenPushes } from '../helpers/pushes';
import { useStack } from '../helpers/stack';
import { lockWaiters as waitForLockWaiters } from '../helpers/wait';

const ID_SECRET = 'oauth-test-id-app-secret';
// Every token call is anonymous (client credentials in the body): the anonymous tier is raised.
const stack = useStack(test, { env: { ID_APPS: `idapp:${ID_SECRET}`, RATE_LIMIT_ANONYMOUS: '1000' } });
const REDIRECT = 'https://client.example/callback';
const ME = { query: '{ me { userId apiKeyId permissions } }' };

interface Client {
  id: string;
  secret: string | null;
}

const assertion = (userId: string) => signAppAssertion({ appId: 'idapp', secret: ID_SECRET, subject: userId });
const pkce = () => {
  const verifier = randomBytes(48).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

async function makeClient(owner: TestUser, body: Record<string, unknown> = {}): Promise<Client> {
  const r = await stack().request('POST', '/v1/oauth/clients', {
    token: owner.token,
    body: {
      name: 'Third Party',
      redirect_uris: [REDIRECT],
      allowed_scopes: ['gps:read', 'trips:read', 'users:read'],
      ...body,
    },
  });
  if (r.status !== 201) throw new Error(r.text);
  return { id: r.body.client.id, secret: r.body.client_secret };
}

async function authorize(
  user: TestUser,
  client: Client,
  o: {
    scope?: string;
    state?: string;
    challenge?: string;
    method?: string;
    redirect?: string;
    header?: string | null;
  } = {},
) {
  const q = new URLSearchParams({
    client_id: client.id,
    redirect_uri: o.redirect ?? REDIRECT,
    response_type: 'code',
    state: o.state ?? 'st-123',
    code_challenge: o.challenge ?? pkce().challenge,
    code_challenge_method: o.method ?? 'S256',
  });
  if (o.scope !== undefined) q.set('scope', o.scope);
  const headers: Record<string, string> = {};
  if (o.header !== null) headers['x-id-app-assertion'] = o.header ?? assertion(user.id);
  return stack().request('GET', `/v1/oauth/authorize?${q}`, { headers });
}

async function codeFor(user: TestUser, client: Client, scope?: string) {
  const p = pkce();
  const r = await authorize(user, client, { challenge: p.challenge, scope });
  if (r.status !== 200) throw new Error(r.text);
  return { code: new URL(r.body.redirect_to).searchParams.get('code')!, verifier: p.verifier };
}

/** The token endpoint, form-encoded as OAuth clients usually send it. */
function token(params: Record<string, string | undefined | null>, headers: Record<string, string> = {}) {
  const form = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) form.set(k, v);
  return stack().request('POST', '/v1/oauth/token', {
    rawBody: form.toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
  });
}

/** HTTP Basic client credentials (RFC 6749 §2.3.1): id and secret form-urlencoded, then base64. */
const formEncoded = (value: string) => new URLSearchParams({ v: value }).toString().slice(2);
const basic = (id: string, secret: string) => ({
  authorization: `Basic ${Buffer.from(`${formEncoded(id)}:${formEncoded(secret)}`).toString('base64')}`,
});

const exchange = (client: Client, code: string, verifier: string, extra: Record<string, string> = {}) =>
  token({
    grant_type: 'authorization_code',
    code,
    redirect_uri: REDIRECT,
    client_id: client.id,
    client_secret: client.secret,
    code_verifier: verifier,
    ...extra,
  });

const me = (accessToken: string) => stack().request('POST', '/v1/gql', { token: accessToken, body: ME });

/** A grant's access token, refresh token and a code issued before: none works any more. */
async function grantIsDead(
  t: ExecutionContext,
  client: Client,
  tok: { access_token: string; refresh_token: string },
  pending: { code: string; verifier: string },
): Promise<void> {
  t.is((await me(tok.access_token)).status, 401);
  const refreshed = await token({
    grant_type: 'refresh_token',
    refresh_token: tok.refresh_token,
    client_id: client.id,
    client_secret: client.secret,
  });
  t.is(refreshed.status, 400, refreshed.text);
  t.is(refreshed.body.error, 'invalid_grant');
  t.is((await exchange(client, pending.code, pending.verifier)).status, 400);
}

test('full authorization-code + PKCE flow ends in a Bearer call with permissions narrowed to the granted scopes', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_developer'] });
  const client = await makeClient(dev);
  const p = pkce();

  const a = await authorize(user, client, { challenge: p.challenge, scope: 'gps:read users:read', state: 'xyz state' });
  t.is(a.status, 200, a.text);
  const redirect = new URL(a.body.redirect_to);
  t.is(`${redirect.origin}${redirect.pathname}`, REDIRECT);
  t.is(redirect.searchParams.get('state'), 'xyz state');
  const code = redirect.searchParams.get('code')!;
  t.truthy(code);
  // Only the hash is stored, with a short life.
  const row = await s.db('oauth_authorization_codes').where({ user_id: user.id, client_id: client.id }).first();
  t.not(row.code_hash, code);
  t.true(new Date(row.expires_at).getTime() - Date.now() <= 60_000);
  const granted = await s
    .db('audit_events')
    .where({ event_type: 'consent_granted', user_id: user.id, resource_id: client.id })
    .first();
  t.truthy(granted);
  t.deepEqual(granted.metadata.scopes, ['gps:read', 'users:read']);

  const tok = await exchange(client, code, p.verifier);
  t.is(tok.status, 200, tok.text);
  t.deepEqual(Object.keys(tok.body).sort(), ['access_token', 'expires_in', 'refresh_token', 'scope', 'token_type']);
  t.is(tok.body.token_type, 'Bearer');
  t.is(tok.body.expires_in, 3600);
  t.is(tok.body.scope, 'gps:read users:read');
  t.regex(tok.body.access_token, /^oat_/);
  t.is(tok.headers.get('cache-control'), 'no-store');

  const m = await me(tok.body.access_token);
  t.is(m.status, 200);
  t.is(m.body.data.me.userId, user.id);
  t.is(m.body.data.me.apiKeyId, null);
  // users:read was granted to the client but the user does not hold it; trips:read was not requested.
  t.deepEqual(m.body.data.me.permissions, ['gps:read']);

  const consents = await s.request('GET', '/v1/users/me/consents', { token: user.token });
  t.is(consents.status, 200);
  t.is(consents.body.data.length, 1);
  t.is(consents.body.data[0].client_id, client.id);
  t.is(consents.body.data[0].client_name, 'Third Party');
  t.deepEqual(consents.body.data[0].scopes, ['gps:read', 'users:read']);
});

test('authorize also takes a JSON POST; the token endpoint also takes JSON; public clients need no secret', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev, { client_type: 'public' });
  t.is(client.secret, null);
  const p = pkce();
  const a = await s.request('POST', '/v1/oauth/authorize', {
    headers: { 'x-id-app-assertion': assertion(user.id) },
    body: {
      client_id: client.id,
      redirect_uri: REDIRECT,
      response_type: 'code',
      scope: 'trips:read',
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
    },
  });
  t.is(a.status, 200, a.text);
  t.is(new URL(a.body.redirect_to).searchParams.get('state'), null);
  const code = new URL(a.body.redirect_to).searchParams.get('code')!;
  const tok = await s.request('POST', '/v1/oauth/token', {
    body: {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      client_id: client.id,
      code_verifier: p.verifier,
    },
  });
  t.is(tok.status, 200, tok.text);
  t.deepEqual((await me(tok.body.access_token)).body.data.me.permissions, ['trips:read']);
  // Without a scope parameter the client's allowed scopes are requested.
  const { code: c2, verifier } = await codeFor(user, client);
  const t2 = await s.request('POST', '/v1/oauth/token', {
    body: {
      grant_type: 'authorization_code',
      code: c2,
      redirect_uri: REDIRECT,
      client_id: client.id,
      code_verifier: verifier,
    },
  });
  t.is(t2.body.scope, 'gps:read trips:read users:read');
});

test('authorize refusals: assertion, client, redirect_uri, scope, PKCE parameters', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  t.is((await authorize(user, client, { header: null })).status, 401);
  t.is((await authorize(user, client, { header: assertion(user.id).slice(0, -2) + 'xx' })).status, 401);
  const used = assertion(user.id);
  t.is((await authorize(user, client, { header: used })).status, 200);
  t.is((await authorize(user, client, { header: used })).status, 401);
  const unknown = await authorize(user, { id: '00000000-0000-4000-8000-000000000000', secret: null });
  t.is(unknown.status, 400);
  t.is(unknown.body.error, 'invalid_client');
  const redirect = await authorize(user, client, { redirect: 'https://evil.example/callback' });
  t.is(redirect.status, 400);
  t.regex(redirect.body.message, /redirect_uri/);
  const scope = await authorize(user, client, { scope: 'gps:read users:delete' });
  t.is(scope.status, 400);
  t.is(scope.body.error, 'invalid_scope');
  t.is((await authorize(user, client, { method: 'plain' })).status, 400);
  t.is((await authorize(user, client, { challenge: 'short' })).status, 400);
  // An inactive client is refused.
  await s.request('PATCH', `/v1/oauth/clients/${client.id}`, { token: dev.token, body: { is_active: false } });
  t.is((await authorize(user, client)).status, 400);
  // A deleted user behind a valid assertion is refused.
  const gone = await createUser(s.db);
  await s.db('users').where('id', gone.id).update({ deleted_at: new Date() });
  const c2 = await makeClient(dev);
  t.is((await authorize(gone, c2)).status, 401);
});

test('a wrong code_verifier fails and burns the code; wrong redirect_uri, wrong client and bad secrets fail', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  const other = await makeClient(dev);

  const { code, verifier } = await codeFor(user, client);
  const wrong = await exchange(client, code, pkce().verifier);
  t.is(wrong.status, 400);
  t.is(wrong.body.error, 'invalid_grant');
  t.regex(wrong.body.message, /code_verifier/);
  t.is((await exchange(client, code, verifier)).status, 400); // single use, even after a failure

  const c2 = await codeFor(user, client);
  const badRedirect = await exchange(client, c2.code, c2.verifier, { redirect_uri: 'https://client.example/other' });
  t.is(badRedirect.body.error, 'invalid_grant');

  const c3 = await codeFor(user, client);
  const noSecret = await exchange({ id: client.id, secret: null }, c3.code, c3.verifier);
  t.is(noSecret.status, 401);
  t.is(noSecret.body.error, 'invalid_client');
  const badSecret = await exchange({ id: client.id, secret: 'ocs_wrong' }, c3.code, c3.verifier);
  t.is(badSecret.status, 401);
  const otherClient = await exchange(other, c3.code, c3.verifier);
  t.is(otherClient.status, 400);
  t.is(otherClient.body.error, 'invalid_grant');

  const c4 = await codeFor(user, client);
  t.is((await exchange(client, c4.code, 'too-short')).status, 400);
  const unsupported = await token({ grant_type: 'password', client_id: client.id, client_secret: client.secret });
  t.is(unsupported.body.error, 'unsupported_grant_type');
  // A regenerated secret replaces the old one at the token endpoint.
  const c5 = await codeFor(user, client);
  const fresh = (await s.request('POST', `/v1/oauth/clients/${client.id}/regenerate-secret`, { token: dev.token })).body
    .client_secret;
  t.is((await exchange(client, c5.code, c5.verifier)).status, 401);
  t.is((await exchange({ id: client.id, secret: fresh }, c5.code, c5.verifier)).status, 200);
});

test('confidential clients may authenticate with HTTP Basic at the token endpoint, one method per request', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  const other = await makeClient(dev);
  const grant = (code: string, verifier: string, extra: Record<string, string> = {}) => ({
    grant_type: 'authorization_code',
    code,
    redirect_uri: REDIRECT,
    code_verifier: verifier,
    ...extra,
  });

  // A wrong secret in the header: invalid_client with the challenge, and the code is not spent.
  const c1 = await codeFor(user, client, 'gps:read');
  const wrong = await token(grant(c1.code, c1.verifier), basic(client.id, 'ocs_wrong'));
  t.is(wrong.status, 401);
  t.is(wrong.body.error, 'invalid_client');
  t.is(wrong.body.error_description, 'client authentication failed');
  t.is(wrong.headers.get('www-authenticate'), 'Basic realm="oauth"');
  const ok = await token(grant(c1.code, c1.verifier), basic(client.id, client.secret!));
  t.is(ok.status, 200, ok.text);
  t.is(ok.headers.get('cache-control'), 'no-store');
  t.deepEqual((await me(ok.body.access_token)).body.data.me.permissions, ['gps:read']);
  const refreshed = await token(
    { grant_type: 'refresh_token', refresh_token: ok.body.refresh_token },
    basic(client.id, client.secret!),
  );
  t.is(refreshed.status, 200, refreshed.text);

  // Both methods at once is a malformed request; the same client_id beside the header is not, nor
  // an empty client_secret (RFC 6749 §3.2: as if not sent).
  const c2 = await codeFor(user, client);
  const twice = await token(
    grant(c2.code, c2.verifier, { client_secret: client.secret! }),
    basic(client.id, client.secret!),
  );
  t.is(twice.status, 400);
  t.is(twice.body.error, 'invalid_request');
  t.is(twice.headers.get('www-authenticate'), null);
  const otherId = await token(grant(c2.code, c2.verifier, { client_id: other.id }), basic(client.id, client.secret!));
  t.is(otherId.status, 400);
  t.is(otherId.body.error, 'invalid_request');
  const sameId = await token(
    grant(c2.code, c2.verifier, { client_id: client.id, client_secret: '' }),
    basic(client.id, client.secret!),
  );
  t.is(sameId.status, 200, sameId.text);

  // Another scheme, or a value that is not base64 of id:secret, is a failed client authentication.
  for (const authorization of [
    'Digest username="x"',
    'Basic !!!',
    `Basic ${Buffer.from(client.id).toString('base64')}`,
  ]) {
    const r = await token(grant(c2.code, c2.verifier), { authorization });
    t.is(r.status, 401, authorization);
    t.is(r.body.error, 'invalid_client');
    t.is(r.headers.get('www-authenticate'), 'Basic realm="oauth"');
  }

  // Id and secret are form-urlencoded before base64: a colon, a plus, a space, non-ASCII.
  const odd = 'a:b+c d/é%';
  await s
    .db('oauth_clients')
    .where('id', client.id)
    .update({ client_secret_hash: sha256(odd) });
  const c3 = await codeFor(user, client);
  t.is((await token(grant(c3.code, c3.verifier), basic(client.id, odd))).status, 200);
  // A public client sends its id with an empty secret.
  const pub = await makeClient(dev, { client_type: 'public' });
  const c4 = await codeFor(user, pub);
  t.is((await token(grant(c4.code, c4.verifier), basic(pub.id, ''))).status, 200);
});

test('Basic credentials are refused everywhere but the token endpoint, as a malformed bearer credential', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const client = await makeClient(dev);
  const header = basic(client.id, client.secret!);
  for (const [method, path] of [
    ['GET', '/v1/users/me'],
    ['GET', `/v1/oauth/clients/${client.id}`],
    ['GET', '/v1/oauth/authorize'],
    // The token endpoint's path with another method: no route that authenticates clients.
    ['GET', '/v1/oauth/token'],
    ['POST', '/v1/oauth/clients'],
  ]) {
    const r = await s.request(method, path, { headers: header, ...(method === 'POST' ? { body: {} } : {}) });
    t.is(r.status, 401, `${method} ${path}`);
    t.deepEqual(r.body, { error: 'Unauthorized', message: 'malformed Authorization header: expected Bearer <token>' });
  }
});

test("malformed token requests are invalid_request (RFC 6749 §5.2), not the service's BadRequest or 415", async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const client = await makeClient(dev);
  const raw = (rawBody: string, contentType: string) =>
    s.request('POST', '/v1/oauth/token', { rawBody, headers: { 'content-type': contentType } });
  const form = 'application/x-www-form-urlencoded';
  type Answer = {
    status: number;
    body: { error: string; message: string; error_description: string };
    headers: Headers;
  };
  const cases: Array<[string, () => Promise<Answer>, RegExp]> = [
    ['no grant_type', () => token({ client_id: client.id, client_secret: client.secret }), /^grant_type: Required$/],
    ['empty grant_type', () => token({ grant_type: '', client_id: client.id }), /^grant_type: Required$/],
    [
      'repeated grant_type',
      () => raw('grant_type=authorization_code&grant_type=refresh_token', form),
      /^grant_type: given more than once$/,
    ],
    [
      'repeated client_id',
      () => raw(`grant_type=refresh_token&client_id=${client.id}&client_id=x`, form),
      /^client_id: given more than once$/,
    ],
    ['text/plain', () => raw('grant_type=refresh_token', 'text/plain'), /Content-Type 'text\/plain'/],
    ['malformed JSON', () => raw('{"grant_type":', 'application/json'), /JSON/],
    [
      'a field too long',
      () => token({ grant_type: 'refresh_token', refresh_token: 'x'.repeat(513) }),
      /^refresh_token: /,
    ],
  ];
  for (const [what, answer, description] of cases) {
    const r = await answer();
    t.is(r.status, 400, what);
    t.is(r.body.error, 'invalid_request', what);
    t.regex(r.body.error_description, description, what);
    t.is(r.body.message, r.body.error_description, what);
    t.is(r.headers.get('cache-control'), 'no-store', what);
  }
  const unsupported = await token({ grant_type: 'password', client_id: client.id });
  t.is(unsupported.status, 400);
  t.is(unsupported.body.error, 'unsupported_grant_type');
  t.is(unsupported.headers.get('cache-control'), 'no-store');
  const badGrant = await token({
    grant_type: 'refresh_token',
    refresh_token: 'ort_nope',
    client_id: client.id,
    client_secret: client.secret,
  });
  t.is(badGrant.body.error, 'invalid_grant');
  t.is(badGrant.headers.get('cache-control'), 'no-store');

  // Other routes keep the service's own errors.
  const clients = await s.request('POST', '/v1/oauth/clients', {
    token: dev.token,
    rawBody: 'name=x',
    headers: { 'content-type': 'text/plain' },
  });
  t.is(clients.status, 415);
  t.is(clients.body.error, 'UnsupportedMediaType');
  const login = await s.request('POST', '/v1/auth/login', { body: {} });
  t.is(login.status, 400);
  t.is(login.body.error, 'BadRequest');
  t.is(login.headers.get('pragma'), null, "the OAuth error headers are the token endpoint's own");
  const authorize = await s.request('POST', '/v1/oauth/authorize', {
    rawBody: 'x',
    headers: { 'content-type': 'text/plain' },
  });
  t.is(authorize.status, 415);
});

test('a reused code is refused and revokes the tokens it produced; an expired code is refused', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  const { code, verifier } = await codeFor(user, client, 'gps:read');
  const first = await exchange(client, code, verifier);
  t.is(first.status, 200);
  t.is((await me(first.body.access_token)).status, 200);
  const again = await exchange(client, code, verifier);
  t.is(again.status, 400);
  t.is(again.body.error, 'invalid_grant');
  t.is((await me(first.body.access_token)).status, 401);
  t.is(
    (
      await token({
        grant_type: 'refresh_token',
        refresh_token: first.body.refresh_token,
        client_id: client.id,
        client_secret: client.secret,
      })
    ).status,
    400,
  );

  const late = await codeFor(user, client);
  await s
    .db('oauth_authorization_codes')
    .where('user_id', user.id)
    .whereNull('used_at')
    .update({ expires_at: new Date(Date.now() - 1000) });
  const expired = await exchange(client, late.code, late.verifier);
  t.is(expired.status, 400);
  t.regex(expired.body.message, /expired/);
});

test('a code presented many times at once: one exchange wins, and the reuses revoke its tokens', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  for (let round = 0; round < 3; round++) {
    const { code, verifier } = await codeFor(user, client, 'gps:read');
    const answers = await Promise.all(Array.from({ length: 12 }, () => exchange(client, code, verifier)));
    const won = answers.filter((a) => a.status === 200);
    t.is(won.length, 1, JSON.stringify(answers.map((a) => a.status)));
    t.true(answers.every((a) => a.status === 200 || a.body.error === 'invalid_grant'));
    // Every reuse answered after the winner's tokens existed, so they are revoked.
    t.is((await me(won[0].body.access_token)).status, 401);
  }
});

test('refresh rotation: each refresh token works once; reusing an old one revokes the whole chain', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  const { code, verifier } = await codeFor(user, client, 'gps:read trips:read');
  const t0 = (await exchange(client, code, verifier)).body;

  const r1 = await token({
    grant_type: 'refresh_token',
    refresh_token: t0.refresh_token,
    client_id: client.id,
    client_secret: client.secret,
  });
  t.is(r1.status, 200, r1.text);
  t.not(r1.body.refresh_token, t0.refresh_token);
  t.not(r1.body.access_token, t0.access_token);
  t.is(r1.body.scope, 'gps:read trips:read');
  t.is((await me(r1.body.access_token)).status, 200);

  // Narrowing on refresh is allowed, widening is not.
  const r2 = await token({
    grant_type: 'refresh_token',
    refresh_token: r1.body.refresh_token,
    client_id: client.id,
    client_secret: client.secret,
    scope: 'gps:read',
  });
  t.is(r2.status, 200);
  t.deepEqual((await me(r2.body.access_token)).body.data.me.permissions, ['gps:read']);
  const widen = await token({
    grant_type: 'refresh_token',
    refresh_token: r2.body.refresh_token,
    client_id: client.id,
    client_secret: client.secret,
    scope: 'gps:read trips:read',
  });
  t.is(widen.body.error, 'invalid_scope');

  // Another client cannot use this refresh token.
  const other = await makeClient(dev);
  t.is(
    (
      await token({
        grant_type: 'refresh_token',
        refresh_token: r2.body.refresh_token,
        client_id: other.id,
        client_secret: other.secret,
      })
    ).body.error,
    'invalid_grant',
  );

  // Reuse of the already-rotated r1 token: refused, and every token of the chain dies.
  const reuse = await token({
    grant_type: 'refresh_token',
    refresh_token: t0.refresh_token,
    client_id: client.id,
    client_secret: client.secret,
  });
  t.is(reuse.status, 400);
  t.is(reuse.body.error, 'invalid_grant');
  t.regex(reuse.body.message, /already used/);
  t.is((await me(r2.body.access_token)).status, 401);
  t.is((await me(r1.body.access_token)).status, 401);
  const latest = await token({
    grant_type: 'refresh_token',
    refresh_token: r2.body.refresh_token,
    client_id: client.id,
    client_secret: client.secret,
  });
  t.is(latest.body.error, 'invalid_grant');
  // A separate grant of the same user and client is unaffected.
  const again = await codeFor(user, client, 'gps:read');
  const t3 = (await exchange(client, again.code, again.verifier)).body;
  t.is((await me(t3.access_token)).status, 200);
});

test("revoking a consent kills the client's tokens at once, audits, pushes oauthConsentRevoked", async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  const keep = await makeClient(dev);
  const { code, verifier } = await codeFor(user, client, 'gps:read');
  const tok = (await exchange(client, code, verifier)).body;
  const k = await codeFor(user, keep, 'gps:read');
  const keepTok = (await exchange(keep, k.code, k.verifier)).body;
  t.is((await me(tok.access_token)).status, 200);
  const pending = await codeFor(user, client, 'gps:read');

  const pushes = await listenPushes(s.redis, s.config, `user:${user.id}`);
  try {
    t.is((await s.request('GET', '/v1/users/me/consents', { token: user.token })).body.data.length, 2);
    const del = await s.request('DELETE', `/v1/users/me/consents/${client.id}`, { token: user.token });
    t.is(del.status, 204);
    t.is((await me(tok.access_token)).status, 401);
    t.is(
      (
        await token({
          grant_type: 'refresh_token',
          refresh_token: tok.refresh_token,
          client_id: client.id,
          client_secret: client.secret,
        })
      ).status,
      400,
    );
    t.is((await exchange(client, pending.code, pending.verifier)).status, 400);
    t.is((await me(keepTok.access_token)).status, 200);
    const push = await pushes.waitFor((m) => m.type === 'oauthConsentRevoked');
    t.is(push.userId, user.id);
    t.is(push.clientId, client.id);
    t.truthy(push.timestamp);
    const audit = await s
      .db('audit_events')
      .where({ event_type: 'consent_revoked', user_id: user.id, resource_id: client.id })
      .first();
    t.truthy(audit);
    const left = await s.request('GET', '/v1/users/me/consents', { token: user.token });
    t.deepEqual(
      left.body.data.map((c: { client_id: string }) => c.client_id),
      [keep.id],
    );
    t.is((await s.request('DELETE', `/v1/users/me/consents/${client.id}`, { token: user.token })).status, 404);
    t.is((await s.request('GET', '/v1/users/me/consents')).status, 401);
  } finally {
    pushes.close();
  }
});

test('an API key of the user lists and revokes consents with account:consents, never without it', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  const { code, verifier } = await codeFor(user, client, 'gps:read');
  const tok = (await exchange(client, code, verifier)).body;
  const scoped = await createKey({ userId: user.id, scopes: ['account:consents'] });
  for (const scopes of [['*:*'], ['users:read', 'users:write']]) {
    const other = await createKey({ userId: user.id, scopes });
    t.is((await s.request('GET', '/v1/users/me/consents', { token: other.key })).status, 403, scopes.join(' '));
    const del = await s.request('DELETE', `/v1/users/me/consents/${client.id}`, { token: other.key });
    t.is(del.status, 403, scopes.join(' '));
  }
  const listed = await s.request('GET', '/v1/users/me/consents', { token: scoped.key });
  t.is(listed.status, 200, listed.text);
  t.deepEqual(
    listed.body.data.map((c: { client_id: string }) => c.client_id),
    [client.id],
  );
  const del = await s.request('DELETE', `/v1/users/me/consents/${client.id}`, { token: scoped.key });
  t.is(del.status, 204, del.text);
  t.is((await me(tok.access_token)).status, 401);
});

test('deactivating or deleting a client stops its access tokens at once', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  const { code, verifier } = await codeFor(user, client, 'gps:read trips:read');
  const tok = (await exchange(client, code, verifier)).body;
  t.deepEqual((await me(tok.access_token)).body.data.me.permissions, ['gps:read', 'trips:read']);
  // Narrowing the client's allowed scopes narrows its live tokens.
  await s.request('PATCH', `/v1/oauth/clients/${client.id}`, {
    token: dev.token,
    body: { allowed_scopes: ['gps:read'] },
  });
  t.deepEqual((await me(tok.access_token)).body.data.me.permissions, ['gps:read']);
  await s.request('PATCH', `/v1/oauth/clients/${client.id}`, { token: dev.token, body: { is_active: false } });
  t.is((await me(tok.access_token)).status, 401);
  await s.request('PATCH', `/v1/oauth/clients/${client.id}`, { token: dev.token, body: { is_active: true } });
  t.is((await me(tok.access_token)).status, 200);
  t.is((await s.request('DELETE', `/v1/oauth/clients/${client.id}`, { token: dev.token })).status, 204);
  t.is((await me(tok.access_token)).status, 401);
});

test("a narrowed client: refreshes answer only what it may still ask for; its users' consents stand", async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  const refresh = (refreshToken: string, scope?: string) =>
    token({
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: client.id,
      client_secret: client.secret,
      scope,
    });
  const patch = (allowed: string[]) =>
    s.request('PATCH', `/v1/oauth/clients/${client.id}`, { token: dev.token, body: { allowed_scopes: allowed } });
  const perms = async (accessToken: string) => (await me(accessToken)).body.data.me.permissions;
  const c1 = await codeFor(user, client, 'gps:read trips:read');
  const a = (await exchange(client, c1.code, c1.verifier)).body;
  t.is(a.scope, 'gps:read trips:read');

  // Narrowed: the live token is cut at once, and a refresh answers what it issues (RFC 6749 §5.1).
  t.is((await patch(['trips:read', 'users:read'])).status, 200);
  t.deepEqual(await perms(a.access_token), ['trips:read']);
  const a1 = await refresh(a.refresh_token);
  t.is(a1.status, 200, a1.text);
  t.is(a1.body.scope, 'trips:read', 'the scope answered describes the issued token');
  t.deepEqual(await perms(a1.body.access_token), ['trips:read']);
  const stored = await s.db('oauth_access_tokens').where('token_hash', sha256(a1.body.access_token)).first();
  t.deepEqual(stored.scopes, ['trips:read']);
  // A code issued while the client was wide, exchanged now, is cut too.
  t.is((await patch(['gps:read', 'trips:read', 'users:read'])).status, 200);
  const c2 = await codeFor(user, client, 'gps:read trips:read');
  t.is((await patch(['trips:read', 'users:read'])).status, 200);
  t.is((await exchange(client, c2.code, c2.verifier)).body.scope, 'trips:read');

  // The client's allowed scopes are a ceiling over what the user consented to, not a revocation:
  // widened again, the next refresh of the grant holds the consented scopes (revoking is the user's).
  t.is((await patch(['gps:read', 'trips:read', 'users:read'])).status, 200);
  const a2 = await refresh(a1.body.refresh_token);
  t.is(a2.body.scope, 'gps:read trips:read', a2.text);
  t.deepEqual(await perms(a2.body.access_token), ['gps:read', 'trips:read']);
});

test('an OAuth token follows its user: role changes and bans apply to it', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev, { allowed_scopes: ['gps:read', 'gps:write'] });
  const { code, verifier } = await codeFor(user, client);
  const tok = (await exchange(client, code, verifier)).body;
  t.deepEqual((await me(tok.access_token)).body.data.me.permissions, ['gps:read']);
  await s.db('user_roles').insert({ user_id: user.id, role_id: 'role_developer' });
  await s.api.services.bus.invalidateAuth({ userIds: [user.id] });
  await new Promise((r) => setTimeout(r, 50));
  t.deepEqual((await me(tok.access_token)).body.data.me.permissions, ['gps:read', 'gps:write']);
  await s.db('bans').insert({ user_id: user.id, reason: 'abuse', is_permanent: true });
  await s.api.services.bus.invalidateAuth({ userIds: [user.id] });
  await new Promise((r) => setTimeout(r, 50));
  t.is((await me(tok.access_token)).status, 403);
  t.is(
    (
      await token({
        grant_type: 'refresh_token',
        refresh_token: tok.refresh_token,
        client_id: client.id,
        client_secret: client.secret,
      })
    ).status,
    400,
  );
});

test("a soft delete revokes the user's OAuth tokens and consents: restoring the account brings none back", async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const bystander = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  const { code, verifier } = await codeFor(user, client, 'gps:read');
  const tok = (await exchange(client, code, verifier)).body;
  const pending = await codeFor(user, client, 'gps:read');
  const b = await codeFor(bystander, client, 'gps:read');
  const other = (await exchange(client, b.code, b.verifier)).body;
  t.is((await me(tok.access_token)).status, 200);

  t.is((await s.request('DELETE', `/v1/users/${user.id}`, { token: admin.token })).status, 204);
  t.is((await me(tok.access_token)).status, 401);
  const restored = await s.request('POST', `/v1/admin/users/${user.id}/cancel-deletion`, { token: admin.token });
  t.is(restored.status, 200, restored.text);

  // Like its sessions and API keys, the account's OAuth grants stay dead after the restore.
  await grantIsDead(t, client, tok, pending);
  const stored = await s.db('oauth_access_tokens').where('token_hash', sha256(tok.access_token)).first();
  t.truthy(stored.revoked_at);
  const consent = await s.db('oauth_consents').where({ user_id: user.id, client_id: client.id }).first();
  t.truthy(consent.revoked_at, 'the consent is revoked: the user is asked again');
  // Another user of the same client keeps theirs.
  t.is((await me(other.access_token)).status, 200);

  // The restored user may authorize the client again.
  const again = await codeFor(user, client, 'gps:read');
  const fresh = await exchange(client, again.code, again.verifier);
  t.is(fresh.status, 200, fresh.text);
  t.is((await me(fresh.body.access_token)).status, 200);
});

test("a password reset revokes the user's OAuth tokens and keeps the consents", async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  const { code, verifier } = await codeFor(user, client, 'gps:read');
  const tok = (await exchange(client, code, verifier)).body;
  const pending = await codeFor(user, client, 'gps:read');
  t.is((await me(tok.access_token)).status, 200);

  const reset = await s.request('POST', '/v1/auth/reset-password/confirm', {
    body: { token: await passwordResetToken(s.db, user), password: 'brand-new-pass-1' },
  });
  t.is(reset.status, 200, reset.text);

  // Logged out everywhere: the OAuth grant's tokens (and a code issued before the reset) no longer work.
  await grantIsDead(t, client, tok, pending);

  // The consent stands: the user signs the app in again without being asked anew.
  const consent = await s.db('oauth_consents').where({ user_id: user.id, client_id: client.id }).first();
  t.is(consent.revoked_at, null);
  const again = await codeFor(user, client, 'gps:read');
  const fresh = await exchange(client, again.code, again.verifier);
  t.is(fresh.status, 200, fresh.text);
  t.is((await me(fresh.body.access_token)).status, 200);
});

test('the scheduled cleanup removes codes and tokens a day past expiry and keeps live ones', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  const { code, verifier } = await codeFor(user, client, 'gps:read');
  const live = (await exchange(client, code, verifier)).body;
  const old = await codeFor(user, client, 'gps:read');
  const dead = (await exchange(client, old.code, old.verifier)).body;
  const longAgo = new Date(Date.now() - 2 * 86400_000);
  const { sha256 } = await import('../../shared/crypto');
  await s.db('oauth_access_tokens').where('token_hash', sha256(dead.access_token)).update({ expires_at: longAgo });
  await s.db('oauth_refresh_tokens').where('token_hash', sha256(dead.refresh_token)).update({ expires_at: longAgo });
  await s.db('oauth_authorization_codes').where('code_hash', sha256(old.code)).update({ expires_at: longAgo });
  const { scheduledTasks } = await import('../../workers/processors/scheduled');
  const result = await scheduledTasks.cleanupOAuth(s.api.services);
  t.true(result.codes >= 1 && result.accessTokens >= 1 && result.refreshTokens >= 1);
  t.falsy(await s.db('oauth_access_tokens').where('token_hash', sha256(dead.access_token)).first());
  t.is((await me(live.access_token)).status, 200);
  t.is(
    (
      await token({
        grant_type: 'refresh_token',
        refresh_token: live.refresh_token,
        client_id: client.id,
        client_secret: client.secret,
      })
    ).status,
    200,
  );
});

const lockWaiters = (n: number) => waitForLockWaiters(stack().db, n);

test.serial('a consent revoked while a grant issues tokens: the new tokens are revoked too', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  const first = await codeFor(user, client, 'gps:read');
  const tok = (await exchange(client, first.code, first.verifier)).body;
  const refresh = () =>
    token({
      grant_type: 'refresh_token',
      refresh_token: tok.refresh_token,
      client_id: client.id,
      client_secret: client.secret,
    });
  const pending = await codeFor(user, client, 'gps:read');
  for (const grant of [() => exchange(client, pending.code, pending.verifier), refresh]) {
    // The user's row held FOR UPDATE parks the grant at its token INSERT (the foreign key's check),
    // after every check it makes; the revocation then runs into the grant's locks.
    const hold = await s.db.transaction();
    try {
      await hold.raw('SELECT id FROM users WHERE id = ? FOR UPDATE', [user.id]);
      const granted = grant();
      await lockWaiters(1);
      const revoked = s.request('DELETE', `/v1/users/me/consents/${client.id}`, { token: user.token });
      await lockWaiters(2);
      await hold.commit();
      const [g, r] = await Promise.all([granted, revoked]);
      t.is(r.status, 204);
      // Issued before the revocation committed, so revoked by it; or refused. Never a live token.
      if (g.status === 200) t.is((await me(g.body.access_token)).status, 401);
      else t.is(g.body.error, 'invalid_grant');
    } finally {
      if (!hold.isCompleted()) await hold.rollback();
    }
    // Consent again for the next grant: sign in through the app, then take a fresh refresh token.
    const again = await codeFor(user, client, 'gps:read');
    Object.assign(tok, (await exchange(client, again.code, again.verifier)).body);
    Object.assign(pending, await codeFor(user, client, 'gps:read'));
  }
});

test.serial('a grant and a deletion of its client at once: both answer, no deadlock', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  for (const kind of ['refresh', 'exchange'] as const) {
    const client = await makeClient(dev);
    const first = await codeFor(user, client, 'gps:read');
    const tok = (await exchange(client, first.code, first.verifier)).body;
    const pending = await codeFor(user, client, 'gps:read');
    const grant = () =>
      kind === 'refresh'
        ? token({
            grant_type: 'refresh_token',
            refresh_token: tok.refresh_token,
            client_id: client.id,
            client_secret: client.secret,
          })
        : exchange(client, pending.code, pending.verifier);
    // An authorize in flight holds the consent: the grant and the deletion queue up behind it.
    const hold = await s.db.transaction();
    try {
      await hold.raw('SELECT id FROM oauth_consents WHERE client_id = ? FOR UPDATE', [client.id]);
      const granted = grant();
      await lockWaiters(1);
      const deleted = s.request('DELETE', `/v1/oauth/clients/${client.id}`, { token: dev.token });
      await lockWaiters(2);
      await hold.commit();
      const [g, d] = await Promise.all([granted, deleted]);
      t.is(d.status, 204, `${kind}: delete ${d.status} ${d.text}`);
      t.true(g.status === 200 || g.status === 400 || g.status === 401, `${kind}: grant ${g.status} ${g.text}`);
      // Whatever the grant issued went with the client.
      if (g.status === 200) t.is((await me(g.body.access_token)).status, 401);
    } finally {
      if (!hold.isCompleted()) await hold.rollback();
    }
  }
});

test.serial('a code an authorize in flight commits while a consent is revoked is revoked with it', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const client = await makeClient(dev);
  await codeFor(user, client, 'gps:read'); // the consent
  // An authorize in flight: it holds the consent row and writes its code, committed only after the
  // revocation has started (and marked the codes it could see).
  const p = pkce();
  const code = `oac_${randomBytes(32).toString('base64url')}`;
  const authorize = await s.db.transaction();
  try {
    await authorize('oauth_consents').where({ user_id: user.id, client_id: client.id }).forUpdate().first();
    await authorize('oauth_authorization_codes').insert({
      code_hash: createHash('sha256').update(code).digest('hex'),
      client_id: client.id,
      user_id: user.id,
      redirect_uri: REDIRECT,
      scopes: JSON.stringify(['gps:read']),
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
      expires_at: new Date(Date.now() + 600_000),
    });
    const revoked = s.request('DELETE', `/v1/users/me/consents/${client.id}`, { token: user.token });
    await lockWaiters(1);
    await authorize.commit();
    t.is((await revoked).status, 204);
  } finally {
    if (!authorize.isCompleted()) await authorize.rollback();
  }
  await codeFor(user, client, 'gps:read'); // consent granted again
  const r = await exchange(client, code, p.verifier);
  t.is(r.status, 400, r.text);
  t.is(r.body.error, 'invalid_grant');
});

test.serial(
  'a code an exchange held (then rolled back) during a revocation is refused after consent is granted again',
  async (t) => {
    const s = stack();
    const dev = await createUser(s.db, { roles: ['role_developer'] });
    const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
    const client = await makeClient(dev);
    const old = await codeFor(user, client, 'gps:read trips:read');
    const hash = createHash('sha256').update(old.code).digest('hex');
    t.is((await s.request('DELETE', `/v1/users/me/consents/${client.id}`, { token: user.token })).status, 204);
    // An exchange that held the code while the revocation ran (its passes skip a held code), then
    // failed (a timeout, a lost connection) and rolled back: the code is unused again.
    await s.db('oauth_authorization_codes').where('code_hash', hash).update({ used_at: null });
    t.is((await s.db('oauth_authorization_codes').where('code_hash', hash).first()).used_at, null);
    await codeFor(user, client, 'gps:read'); // consent granted again, narrower
    const r = await exchange(client, old.code, old.verifier);
    t.is(r.status, 400, r.text);
    t.is(r.body.error, 'invalid_grant');
  },
);

test('a *:* grant never widens into account scopes: not at authorize, refresh, or through API keys', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const star = await makeClient(dev, { client_type: 'public', allowed_scopes: ['*:*'] });
  const { code, verifier } = await codeFor(admin, star, '*:*');
  const t0 = await exchange(star, code, verifier);
  t.is(t0.status, 200, t0.text);
  const consents = (tok: string) => s.request('GET', '/v1/users/me/consents', { token: tok });
  t.is((await consents(t0.body.access_token)).status, 403);

  // A refresh may only narrow: naming an account scope (or a wildcard reaching one) widens a *:* grant.
  let refresh = t0.body.refresh_token as string;
  for (const scope of ['account:consents', 'account:email users:read', 'account:*', 'ws:*', 'ws:ticket']) {
    const r = await token({ grant_type: 'refresh_token', refresh_token: refresh, client_id: star.id, scope });
    t.is(r.status, 400, scope);
    t.is(r.body.error, 'invalid_scope', scope);
  }
  const narrowed = await token({
    grant_type: 'refresh_token',
    refresh_token: refresh,
    client_id: star.id,
    scope: 'users:read api_keys:write',
  });
  t.is(narrowed.status, 200, narrowed.text);
  refresh = narrowed.body.refresh_token;

  // A client allowed *:* cannot ask for an account scope it does not name.
  const asked = await authorize(admin, star, { scope: 'users:read account:email' });
  t.is(asked.status, 400);
  t.is(asked.body.error, 'invalid_scope');

  // The admin's *:* token holds every permission but cannot hand out account scopes as an API key.
  for (const scopes of [['account:email'], ['account:*'], ['ws:*']]) {
    const key = await s.request('POST', '/v1/api-keys', {
      token: t0.body.access_token,
      body: { name: 'escalate', scopes },
    });
    t.is(key.status, 403, `${scopes} ${key.text}`);
  }
  const plain = await s.request('POST', '/v1/api-keys', {
    token: t0.body.access_token,
    body: { name: 'plain', scopes: ['users:read'] },
  });
  t.is(plain.status, 201, plain.text);

  // A client that names the scope gets it (the user consents to it by name)...
  const named = await makeClient(dev, { client_type: 'public', allowed_scopes: ['*:*', 'account:consents'] });
  const c2 = await codeFor(admin, named, 'account:consents users:read');
  const t2 = await exchange(named, c2.code, c2.verifier);
  t.is(t2.status, 200, t2.text);
  t.is((await consents(t2.body.access_token)).status, 200);
  // ...and loses it on its live tokens once its allowed scopes stop naming it.
  const patched = await s.request('PATCH', `/v1/oauth/clients/${named.id}`, {
    token: dev.token,
    body: { allowed_scopes: ['*:*'] },
  });
  t.is(patched.status, 200, patched.text);
  t.is((await consents(t2.body.access_token)).status, 403);
});
