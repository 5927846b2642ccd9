import test from 'ava';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { connect, publish, refusedUpgrade, wsBase } from '../helpers/wsClient';

/** Signed-in users here read tracking data: the default User role alone is self-service only. */
const READER = ['role_user', 'role_api_read_only'];

// A 1-second ticket lifetime, so expiry is testable; the other tests connect right after minting.
const stack = useStack(test, { realtime: 1, env: { WS_TICKET_TTL_SECONDS: '1' } });

async function ticketFor(token: string): Promise<string> {
  const s = stack();
  const r = await s.request('POST', '/v1/ws/ticket', { token });
  if (r.status !== 201) throw new Error(`ticket: ${r.status} ${r.text}`);
  return r.body.ticket;
}

test('a ticket from POST /v1/ws/ticket authenticates once, as the user, with the subprotocol echoed', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const r = await s.request('POST', '/v1/ws/ticket', { token: user.token });
  t.is(r.status, 201, r.text);
  t.deepEqual(Object.keys(r.body).sort(), ['expiresIn', 'ticket']);
  t.is(r.body.expiresIn, 1);
  t.regex(r.body.ticket, /^wst_[A-Za-z0-9_-]{40,}$/);
  // Only a hash of the ticket is stored.
  t.deepEqual(await s.redis.keys(`${s.config.redisPrefix}*${r.body.ticket}*`), []);

  const conn = await connect(wsBase(s), { protocols: ['service-ticket', r.body.ticket] });
  t.is(conn.ws.protocol, 'service-ticket');
  // Authenticated as the user: auto-subscribed to user:{id} and allowed on gps.
  await publish(s, `user:${user.id}`, {
    type: 'forceLogout',
    userId: user.id,
    reason: 'test',
    timestamp: new Date().toISOString(),
  });
  t.is((await conn.nextJson((m) => m.type === 'forceLogout')).userId, user.id);

  const again = await refusedUpgrade(wsBase(s), { protocols: ['service-ticket', r.body.ticket] });
  t.is(again.status, 401);
  t.is(again.body.error, 'Unauthorized');
});

test('GraphQL mintWsTicket returns a working ticket; API keys are refused', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const r = await s.request('POST', '/v1/gql', {
    token: user.token,
    body: { query: 'mutation { mintWsTicket { ticket expiresIn } }' },
  });
  t.is(r.status, 200, r.text);
  const { ticket, expiresIn } = r.body.data.mintWsTicket;
  t.is(expiresIn, 1);
  const conn = await connect(wsBase(s), { protocols: ['service-ticket', ticket] });
  t.is((await conn.subscribe('gps')).data, 'Subscribed to gps');
  conn.close();

  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  const denied = await s.request('POST', '/v1/gql', {
    token: key.key,
    body: { query: 'mutation { mintWsTicket { ticket } }' },
  });
  t.is(denied.body.errors[0].extensions.status, 403);
  const anon = await s.request('POST', '/v1/gql', { body: { query: 'mutation { mintWsTicket { ticket } }' } });
  t.is(anon.body.errors[0].extensions.status, 401);
});

test('POST /v1/ws/ticket: API-key-only and system credentials get 403, anonymous 401', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  const byKey = await s.request('POST', '/v1/ws/ticket', { token: key.key });
  t.is(byKey.status, 403);
  t.is(byKey.body.error, 'Forbidden');
  t.is((await s.request('POST', '/v1/ws/ticket', { token: s.systemKey })).status, 403);
  const anon = await s.request('POST', '/v1/ws/ticket');
  t.is(anon.status, 401);
});

test('an expired ticket is refused with 401', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const [fresh, ticket] = await Promise.all([ticketFor(user.token), ticketFor(user.token)]);
  // Within its lifetime a ticket minted with it is accepted…
  const conn = await connect(wsBase(s), { protocols: ['service-ticket', fresh] });
  conn.close();
  // …and once the lifetime is over the other one is refused.
  await new Promise((r) => setTimeout(r, 1300));
  const r = await refusedUpgrade(wsBase(s), { protocols: ['service-ticket', ticket] });
  t.is(r.status, 401);
  t.is(r.body.message, 'invalid, expired or already used ticket');
});

test('unknown tickets and a ticket subprotocol without a ticket are refused with 401', async (t) => {
  const s = stack();
  t.is((await refusedUpgrade(wsBase(s), { protocols: ['service-ticket', 'wst_nottherealthing'] })).status, 401);
  t.is((await refusedUpgrade(wsBase(s), { protocols: ['service-ticket'] })).status, 401);
});

test('a ticket of a revoked session is refused', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const ticket = await ticketFor(user.token);
  await s.db('sessions').where('id', user.sessionId).delete();
  const r = await refusedUpgrade(wsBase(s), { protocols: ['service-ticket', ticket] });
  t.is(r.status, 401);
  // Refused for the session, after the ticket itself was accepted (not because it expired meanwhile).
  t.is(r.body.message, 'the session behind this credential no longer exists');
});

test('the ticket wins over an Authorization header', async (t) => {
  const s = stack();
  const a = await createUser(s.db, { roles: READER });
  const b = await createUser(s.db, { roles: READER });
  const ticket = await ticketFor(a.token);
  const conn = await connect(wsBase(s), { protocols: ['service-ticket', ticket], token: b.token });
  t.is((await conn.subscribe(`user:${a.id}`)).data, `Subscribed to user:${a.id}`);
  t.is((await conn.subscribe(`user:${b.id}`)).message, `access denied to channel user:${b.id}`);
  conn.close();
});

test('Bearer: a session token and an API key authenticate; bad or malformed Bearer is a 401 at upgrade', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const userConn = await connect(wsBase(s), { token: user.token });
  t.is(userConn.ws.protocol, '');
  t.is((await userConn.subscribe(`user:${user.id}`)).data, `Subscribed to user:${user.id}`);
  userConn.close();

  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  const keyConn = await connect(wsBase(s), { token: key.key });
  t.is((await keyConn.subscribe('gps')).data, 'Subscribed to gps');
  keyConn.close();

  const bad = await refusedUpgrade(wsBase(s), { token: 'sess_doesnotexist' });
  t.is(bad.status, 401);
  t.deepEqual(Object.keys(bad.body).sort(), ['error', 'message']);
  t.is((await refusedUpgrade(wsBase(s), { token: 'sk_doesnotexist' })).status, 401);
  t.is((await refusedUpgrade(wsBase(s), { headers: { authorization: 'Basic dXNlcjpwYXNz' } })).status, 401);
});

test('a banned user is refused at upgrade (403), by Bearer and by ticket', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const ticket = await ticketFor(user.token);
  await s.db('bans').insert({ user_id: user.id, reason: 'test', is_permanent: true });
  t.is((await refusedUpgrade(wsBase(s), { protocols: ['service-ticket', ticket] })).status, 403);
  t.is((await refusedUpgrade(wsBase(s), { token: user.token })).status, 403);
});

test('?token= and cookies are ignored: the connection is anonymous', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const conn = await connect(wsBase(s), {
    path: `/v1/ws?token=${encodeURIComponent(user.token)}`,
    headers: { cookie: `token=${user.token}; session=${user.token}` },
  });
  t.is((await conn.subscribe(`user:${user.id}`)).message, `access denied to channel user:${user.id}`);
  t.is((await conn.subscribe('gps')).message, 'access denied to channel gps');
  t.is((await conn.subscribe('public')).data, 'Subscribed to public');
  // Not auto-subscribed to the user channel either.
  await publish(s, `user:${user.id}`, {
    type: 'forceLogout',
    userId: user.id,
    reason: 'x',
    timestamp: new Date().toISOString(),
  });
  t.true(await conn.nothing((f) => f.kind === 'json' && f.data.type === 'forceLogout'));
  conn.close();
});

test('the api forwards /v1/ws on its own port, refusals included', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  t.regex(wsBase(s), new RegExp(`^ws://127\\.0\\.0\\.1:${s.api.port}$`));
  const conn = await connect(wsBase(s), { token: user.token });
  t.is((await conn.subscribe('gps')).data, 'Subscribed to gps');
  conn.json({ type: 'ping' });
  t.deepEqual(await conn.nextJson((m) => m.type === 'pong'), { type: 'pong' });
  conn.close();
  t.is((await refusedUpgrade(wsBase(s), { token: 'sess_nope' })).status, 401);
  const ticket = await ticketFor(user.token);
  const viaTicket = await connect(wsBase(s), { protocols: ['service-ticket', ticket] });
  t.is(viaTicket.ws.protocol, 'service-ticket');
  viaTicket.close();
});

test('the system key may act for a user with ?userId=; other credentials cannot', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const relay = await connect(wsBase(s), { token: s.systemKey, path: `/v1/ws?userId=${user.id}` });
  await publish(s, `user:${user.id}`, {
    type: 'forceLogout',
    userId: user.id,
    reason: 'x',
    timestamp: new Date().toISOString(),
  });
  t.is((await relay.nextJson((m) => m.type === 'forceLogout')).userId, user.id);

  const other = await createUser(s.db, { roles: READER });
  const notRelayed = await connect(wsBase(s), { token: other.token, path: `/v1/ws?userId=${user.id}` });
  t.is((await notRelayed.subscribe(`user:${user.id}`)).message, `access denied to channel user:${user.id}`);
  notRelayed.close();

  t.is((await refusedUpgrade(wsBase(s), { token: s.systemKey, path: '/v1/ws?userId=not-a-uuid' })).status, 400);
  // Two users named: refused, rather than acting for the first.
  const twice = await refusedUpgrade(wsBase(s), {
    token: s.systemKey,
    path: `/v1/ws?userId=${user.id}&userId=${other.id}`,
  });
  t.is(twice.status, 400);
  t.is(
    (
      await refusedUpgrade(wsBase(s), {
        token: s.systemKey,
        path: '/v1/ws?userId=00000000-0000-4000-8000-000000000000',
      })
    ).status,
    400,
  );
  // Without ?userId= the system key is a service client: no user channel.
  const sys = await connect(wsBase(s), { token: s.systemKey });
  t.is((await sys.subscribe(`user:${user.id}`)).message, `access denied to channel user:${user.id}`);
  sys.close();
});

test('X-Source-Service: chat_bot needs the system key or chat:sync; unknown values are refused', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
  t.is((await refusedUpgrade(wsBase(s), { token: key.key, headers: { 'x-source-service': 'chat_bot' } })).status, 403);
  t.is((await refusedUpgrade(wsBase(s), { token: key.key, headers: { 'x-source-service': 'toaster' } })).status, 400);
  const bot = await connect(wsBase(s), { token: s.systemKey, headers: { 'x-source-service': 'chat_bot' } });
  t.is(s.realtime[0].stats().chatBots, 1);
  bot.close();
  await bot.closed;
});

test('unknown paths are refused', async (t) => {
  const s = stack();
  t.is((await refusedUpgrade(`ws://127.0.0.1:${s.realtime[0].port}`, { path: '/v1/other' })).status, 404);
});
