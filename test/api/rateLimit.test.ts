import test from 'ava';
import net from 'node:net';
import { createKey, createUser } from '../helpers/factories';
import { startStack, useStack } from '../helpers/stack';

const stack = useStack(test, {
  env: {
    RATE_LIMIT_ANONYMOUS: '3',
    RATE_LIMIT_USER: '4',
    RATE_LIMIT_API_KEY: '5',
    RATE_LIMIT_GPS_POST: '2',
    RATE_LIMIT_GPS_POST_WINDOW_SECONDS: '30',
    RATE_LIMIT_WINDOW_SECONDS: '60',
    INTERNAL_TOKEN: 'internal-secret-token',
    // Lets a test count as a client address of its own (X-Forwarded-For), apart from the others.
    TRUST_PROXY: 'true',
  },
});

async function exhaust(
  t: import('ava').ExecutionContext,
  req: () => Promise<{ status: number; headers: Headers; body: any }>,
  limit: number,
) {
  // Windows are fixed, aligned to the epoch (60 s here, 30 s for POST /v1/gps): requests that
  // straddle a boundary count in two windows. Start well inside one.
  const intoWindow = Date.now() % 30_000;
  if (intoWindow > 25_000) await new Promise((r) => setTimeout(r, 30_000 - intoWindow + 50));
  for (let i = 1; i <= limit; i++) {
    const r = await req();
    t.not(r.status, 429, `request ${i} of ${limit}`);
    t.is(r.headers.get('x-ratelimit-limit'), String(limit));
    t.is(r.headers.get('x-ratelimit-remaining'), String(limit - i));
  }
  const over = await req();
  t.is(over.status, 429);
  t.is(over.body.error, 'TooManyRequests');
  t.is(typeof over.body.message, 'string');
  t.is(over.headers.get('x-ratelimit-remaining'), '0');
  const reset = Number(over.headers.get('x-ratelimit-reset'));
  t.true(reset > Date.now() / 1000 && reset <= Date.now() / 1000 + 61);
  const retry = Number(over.headers.get('retry-after'));
  t.true(retry >= 1 && retry <= 60);
  return over;
}

test.serial('anonymous tier: 429 after the limit, keyed by IP', async (t) => {
  const s = stack();
  await exhaust(t, () => s.request('GET', '/v1'), 3);
});

test.serial('X-Internal-Token lifts only the anonymous tier; a wrong token does not', async (t) => {
  const s = stack();
  // An address of its own: the anonymous budget it sees is not one an earlier test used.
  const client = { 'x-forwarded-for': '10.77.0.1' };
  for (let i = 0; i < 5; i++) {
    const r = await s.request('GET', '/v1', { headers: { ...client, 'x-internal-token': 'internal-secret-token' } });
    t.is(r.status, 200);
    t.is(r.headers.get('x-ratelimit-limit'), null);
  }
  // Those were not counted: a wrong token has the whole anonymous budget, each request counting.
  await exhaust(t, () => s.request('GET', '/v1', { headers: { ...client, 'x-internal-token': 'wrong' } }), 3);
  // Never applies to user tiers: a user still counts against the user limit.
  const user = await createUser(s.db);
  const r = await s.request('GET', '/v1', {
    token: user.token,
    headers: { 'x-internal-token': 'internal-secret-token' },
  });
  t.is(r.headers.get('x-ratelimit-limit'), '4');
});

test.serial('user tier is keyed by identity, not IP', async (t) => {
  const s = stack();
  const a = await createUser(s.db);
  const b = await createUser(s.db);
  await exhaust(t, () => s.request('GET', '/v1', { token: a.token }), 4);
  const other = await s.request('GET', '/v1', { token: b.token });
  t.is(other.status, 200);
  t.is(other.headers.get('x-ratelimit-remaining'), '3');
});

test.serial('API key tier', async (t) => {
  const s = stack();
  const owner = await createUser(s.db);
  const key = await createKey({ userId: owner.id, scopes: ['gps:read'] });
  await exhaust(t, () => s.request('GET', '/v1', { token: key.key }), 5);
});

test.serial('POST /v1/gps has its own tighter limit on top of the tier', async (t) => {
  const s = stack();
  const owner = await createUser(s.db);
  const key = await createKey({ userId: owner.id, scopes: ['gps:write'] });
  const over = await exhaust(t, () => s.request('POST', '/v1/gps', { token: key.key, body: {} }), 2);
  t.true(Number(over.headers.get('retry-after')) <= 30);
  // Other routes still have room in the API-key tier.
  const r = await s.request('GET', '/v1', { token: key.key });
  t.is(r.status, 200);
});

test.serial('the GPS limit holds in every spelling the router serves: case and a trailing slash', async (t) => {
  const s = stack();
  const owner = await createUser(s.db);
  // A key per spelling, so the API-key tier (5) never answers first.
  for (const path of ['/v1/gps/', '/V1/GPS', '/v1/Gps/', '/v1/GPS/batch', '/v1/gps/batch/']) {
    const key = await createKey({ userId: owner.id, scopes: ['gps:write'] });
    await exhaust(t, () => s.request('POST', '/v1/gps', { token: key.key, body: {} }), 2);
    const r = await s.request('POST', path, { token: key.key, body: {} });
    t.is(r.status, 429, path);
    t.is(r.headers.get('x-ratelimit-limit'), '2', path);
  }
});

/** Sends `head` (and `body`) on a socket of its own; answers what came back within `ms`, and whether it closed. */
function rawExchange(port: number, head: string, body = '', ms = 3000): Promise<{ answer: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(head + body));
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    socket.on('error', () => undefined);
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ answer, closed: false });
    }, ms);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ answer, closed: true });
    });
  });
}

test.serial(
  'every request counts whatever its body, and one over the limit is refused before its body is read',
  async (t) => {
    const s = stack();
    const client = { 'x-forwarded-for': '10.77.0.9', 'content-type': 'application/json' };
    // Malformed bodies were answered by the body parser before the limiter saw them: never counted.
    for (let i = 1; i <= 3; i++) {
      const r = await s.request('POST', '/v1/auth/login', { headers: client, rawBody: '{"email": ' });
      t.is(r.status, 400, `request ${i}`);
      t.is(r.headers.get('x-ratelimit-remaining'), String(3 - i));
    }
    const over = await s.request('POST', '/v1/auth/login', { headers: client, rawBody: '{"email": ' });
    t.is(over.status, 429);
    // Over the limit, a 4 MB body is not waited for: only its head is sent, and the 429 comes back
    // with the connection closed (the body is never read).
    const head =
      'POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 10.77.0.9\r\n' +
      `Content-Type: application/json\r\nContent-Length: ${4 * 1024 * 1024}\r\n\r\n`;
    const unread = await rawExchange(s.api.port, head, '{"email": "');
    t.regex(unread.answer, /^HTTP\/1\.1 429 /);
    t.regex(unread.answer, /\r\nConnection: close\r\n/i);
    t.true(unread.closed);
  },
);

test.serial('system key is unlimited and gets no headers; exempt paths get no headers', async (t) => {
  const s = stack();
  for (let i = 0; i < 8; i++) {
    const r = await s.request('POST', '/v1/gql', { token: s.systemKey, body: { query: '{ me { isSuperAdmin } }' } });
    t.is(r.status, 200);
    t.is(r.headers.get('x-ratelimit-limit'), null);
  }
  for (const path of ['/health', '/v1/health', '/v1/openapi.json', '/v1/schema', '/v1/swagger-ui/']) {
    for (let i = 0; i < 5; i++) {
      const r = await s.request('GET', path);
      t.not(r.status, 429, path);
      t.is(r.headers.get('x-ratelimit-limit'), null, path);
    }
  }
});

test.serial('fail-open: requests pass without headers when the counter store is down', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  // Take the limiter's Redis connection away (as an outage would).
  const limiterRedis = (s.api.services.rateLimiter as unknown as { redis: import('ioredis').default }).redis;
  limiterRedis.disconnect();
  for (let i = 0; i < 6; i++) {
    const r = await s.request('GET', '/v1', { token: user.token });
    t.is(r.status, 200);
    t.is(r.headers.get('x-ratelimit-limit'), null);
  }
});

test('fail-open with REDIS_URL pointing at a dead port: the API still answers', async (t) => {
  const dead = await startStack({ env: { REDIS_URL: 'redis://127.0.0.1:1', RATE_LIMIT_ANONYMOUS: '1' } });
  try {
    for (let i = 0; i < 3; i++) {
      const r = await dead.request('GET', '/v1');
      t.is(r.status, 200);
      t.is(r.headers.get('x-ratelimit-limit'), null);
    }
    const health = await dead.request('GET', '/health');
    t.is(health.status, 503);
    t.is(health.body.services.cache.status, 'down');
    t.is(health.body.services.database.status, 'ok');
  } finally {
    await dead.close();
  }
});
