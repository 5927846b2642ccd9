import test from 'ava';
import { freshEmail } from '../helpers/accounts';
import { createKey, createUser, TestUser } from '../helpers/factories';
import { gpsBody } from '../helpers/tracking';
import { Mailbox, startMailbox } from '../helpers/mailbox';
import { PrivateRedis, startPrivateRedis } from '../helpers/redisServer';
import { startSecondApi } from '../helpers/secondApi';
import { Stack, startStack } from '../helpers/stack';
import { eventually, sleep, timed } from '../helpers/wait';

/**
 * A Redis that stops answering with its connections open (frozen: SIGSTOP), or that is stopped,
 * never stalls a request: every connection a request uses fails fast (1 s command timeout), rate
 * limiting fails open, and work that needs Redis later goes through the side-effect outbox. One
 * private redis-server that the tests freeze, stop and restart: serial.
 */
let redis: PrivateRedis;
let box: Mailbox;
let s: Stack;
let user: TestUser;

test.before(async () => {
  redis = await startPrivateRedis();
  box = await startMailbox();
  // Default rate limits: the anonymous tier (120 a minute) is decided in Redis on every request.
  s = await startStack({ env: { REDIS_URL: redis.url, SMTP_URL: box.url }, workers: true });
  user = await createUser(s.db);
});
test.after.always(async () => {
  redis?.thaw();
  await redis?.start().catch(() => undefined);
  await s?.close();
  await redis?.stop();
  await box?.close();
});

test.serial(
  'a frozen Redis: rate-limited requests answer within about a second, and Redis is used again once it thaws',
  async (t) => {
    // Warm: the credential is cached and the limiter has a connection.
    t.is((await s.request('GET', '/v1/users/me', { token: user.token })).status, 200);
    const before = await s.request('GET', '/v1');
    t.truthy(before.headers.get('x-ratelimit-limit'));
    redis.freeze();
    try {
      for (const [what, call] of [
        ['anonymous GET /v1', () => s.request('GET', '/v1')],
        ['session GET /v1/users/me', () => s.request('GET', '/v1/users/me', { token: user.token })],
      ] as const) {
        const { result, ms } = await timed(call);
        t.is(result.status, 200, `${what}: ${result.text}`);
        // The limiter's command times out after 1 s and the request passes (fail-open, no headers).
        t.true(ms < 2500, `${what} took ${Math.round(ms)} ms`);
      }
    } finally {
      redis.thaw();
    }
    // Back: counted in Redis again.
    let counted = false;
    for (let i = 0; i < 40 && !counted; i++) {
      counted = !!(await s.request('GET', '/v1')).headers.get('x-ratelimit-remaining');
      if (!counted) await sleep(100);
    }
    t.true(counted);
  },
);

test.serial('a frozen Redis costs a request one command timeout at most, and later requests none', async (t) => {
  const owner = await createUser(s.db, { roles: ['role_admin'] });
  const key = await createKey({ userId: owner.id, scopes: ['gps:write', 'gps:read'] });
  const post = () =>
    s.request('POST', '/v1/gps', {
      token: key.key,
      body: gpsBody({ device_id: 'stall-1', timestamp: Math.floor(Date.now() / 1000) }),
    });
  t.is((await post()).status, 201);
  redis.freeze();
  try {
    // POST /v1/gps sends three commands in turn (rate limit, latest-point cache, its clean-up): the
    // first to time out marks Redis stalled for every connection, and the others fail at once.
    const first = await timed(post);
    t.is(first.result.status, 201, first.result.text);
    t.true(first.ms < 1800, `first request took ${Math.round(first.ms)} ms`);
    for (let i = 0; i < 3; i++) {
      const next = await timed(post);
      t.is(next.result.status, 201, next.result.text);
      t.true(next.ms < 500, `request ${i + 2} took ${Math.round(next.ms)} ms`);
    }
  } finally {
    redis.thaw();
  }
  // Answering again: the probe clears the stall, and rate limiting counts in Redis again.
  let counted = false;
  for (let i = 0; i < 50 && !counted; i++) {
    counted = !!(await post()).headers.get('x-ratelimit-remaining');
    if (!counted) await sleep(100);
  }
  t.true(counted);
});

test.serial('a command that times out because this process paused does not stop a Redis that answers', async (t) => {
  const redis = s.api.services.redis;
  t.is(await redis.set(`${s.config.redisPrefix}pause-probe`, '1'), 'OK');
  const pending = redis.get(`${s.config.redisPrefix}pause-probe`).catch((err: Error) => err);
  // The process holds its event loop past the command timeout: the answer is there, but ioredis's
  // timer runs first and the command fails. That is no stall: the PING it sends is answered.
  const until = Date.now() + 1300;
  while (Date.now() < until) {
    /* busy */
  }
  const first = await pending;
  t.true(first instanceof Error && first.message === 'Command timed out', String(first));
  // At once, before the PING is answered: nothing was marked stalled.
  t.is(await redis.get(`${s.config.redisPrefix}pause-probe`), '1');
});

/** Freezes Redis and waits until this process knows it is stalled (a command timed out and its PING went unanswered). */
async function freezeAndNotice(): Promise<void> {
  redis.freeze();
  await s.api.services.redis.get(`${s.config.redisPrefix}stall-probe`).catch(() => undefined);
  await eventually(
    () =>
      s.api.services.redis.get(`${s.config.redisPrefix}stall-probe`).then(
        () => false,
        (err: Error) => /not answering/.test(err.message),
      ),
    5000,
  );
}

test.serial('a GPS point deleted while Redis is frozen is not the current position once it thaws', async (t) => {
  const owner = await createUser(s.db, { roles: ['role_admin'] });
  const key = await createKey({ userId: owner.id, scopes: ['gps:write'] });
  // Later than any other point of the file: the latest, and cached as such by the read.
  const latest = await s.request('POST', '/v1/gps', {
    token: key.key,
    body: gpsBody({ device_id: 'forget-1', timestamp: Math.floor(Date.now() / 1000) + 500 }),
  });
  t.is(latest.status, 201, latest.text);
  const id = latest.body.data.id as string;
  t.is((await s.request('GET', '/v1/gps/current', { token: owner.token })).body.data.id, id);
  await freezeAndNotice();
  try {
    const deleted = await s.request('DELETE', `/v1/gps/${id}`, { token: owner.token });
    t.is(deleted.status, 204, deleted.text);
  } finally {
    redis.thaw();
  }
  // Until this process hears Redis again, reads go to the database (right); from then on the cache
  // answers, and the drop Redis did not take must have been made: the deleted point is nobody's
  // current one.
  await eventually(
    () =>
      s.api.services.redis.get(`${s.config.redisPrefix}stall-probe`).then(
        () => true,
        () => false,
      ),
    5000,
  );
  await eventually(async () => {
    const current = await s.request('GET', '/v1/gps/current', { token: owner.token });
    return current.status === 404 || current.body.data.id !== id;
  }, 10_000);
  const device = await s.request('GET', '/v1/gps/current?device_id=forget-1', { token: owner.token });
  t.is(device.status, 404, device.text);
});

test.serial('a system config change made while Redis is frozen reaches every api once it thaws', async (t) => {
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const second = await startSecondApi(s);
  const defaultLogging = async (url: string) => {
    const r = await fetch(`${url}/v1/trips`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'config probe' }),
    });
    return ((await r.json()) as { data: { gps_logging_enabled: boolean } }).data.gps_logging_enabled;
  };
  const set = (value: boolean) =>
    s.request('PATCH', '/v1/system-config/trips.default_gps_logging', { token: admin.token, body: { value } });
  try {
    t.is((await set(true)).status, 200);
    await eventually(async () => (await defaultLogging(s.url)) && (await defaultLogging(second.url)), 5000);
    await freezeAndNotice();
    try {
      t.is((await set(false)).status, 200);
      t.false(await defaultLogging(s.url));
      // The second api's subscription stays open through the freeze but its pings go unanswered:
      // it trusts its cached value for a second at most (docs/settings.md), Redis still frozen.
      const changed = Date.now();
      await eventually(async () => !(await defaultLogging(second.url)), 5000);
      t.true(Date.now() - changed < 4000, `seen after ${Date.now() - changed} ms`);
    } finally {
      redis.thaw();
    }
    // Once Redis answers again (the outbox relay announces the change), both keep the new value.
    await sleep(1500);
    t.false(await defaultLogging(second.url));
    t.false(await defaultLogging(s.url));
  } finally {
    await second.close();
  }
});

test.serial('Redis stopped: a WebSocket ticket is a 503 with Retry-After, not a 500', async (t) => {
  await redis.stop();
  try {
    const r = await s.request('POST', '/v1/ws/ticket', { token: user.token });
    t.is(r.status, 503, r.text);
    t.is(r.body.error, 'ServiceUnavailable');
    t.truthy(r.headers.get('retry-after'));
  } finally {
    await redis.start();
  }
  // Back once the connection is (ioredis reconnects with a backoff).
  let status = 0;
  for (let i = 0; i < 50 && status !== 201; i++) {
    status = (await s.request('POST', '/v1/ws/ticket', { token: user.token })).status;
    if (status !== 201) await sleep(100);
  }
  t.is(status, 201);
});

test.serial('Redis stopped: a password reset is answered at once and mailed once Redis is back, once', async (t) => {
  const known = await createUser(s.db, { email: freshEmail('reset') });
  await redis.stop();
  try {
    // Asked for three times: the one-mail-a-minute slot cannot be claimed now, so the job claims it.
    for (let i = 0; i < 3; i++) {
      const { result, ms } = await timed(() =>
        s.request('POST', '/v1/auth/reset-password/request', { body: { email: known.email } }),
      );
      t.is(result.status, 202, result.text);
      t.true(ms < 1500, `took ${Math.round(ms)} ms`);
    }
    // Kept in the outbox, in the database, until a relay can enqueue it.
    t.truthy(await s.db('side_effect_outbox').where('kind', 'passwordReset').first());
  } finally {
    await redis.start();
  }
  const mail = await box.waitFor(known.email, (m) => m.subject === 'Reset your password', 30_000);
  t.truthy(mail);
  // Every job has run (the outbox is empty and the queue idle), and only one of them mailed.
  await eventually(async () => !(await s.db('side_effect_outbox').where('kind', 'passwordReset').first()), 10_000);
  await sleep(1500);
  const resets = box.mails.filter(
    (m) => m.to.includes(known.email.toLowerCase()) && m.subject === 'Reset your password',
  );
  t.is(resets.length, 1);
  t.is(
    (await s.db('email_outbox').where({ to_address: known.email.toLowerCase(), template: 'password_reset' })).length,
    1,
  );
});

test.serial(
  'an api started while Redis is frozen waits for the invalidation channel once, not on every narrowing change',
  async (t) => {
    const { startSecondApi } = await import('../helpers/secondApi');
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    const keys = await Promise.all([0, 1, 2, 3].map(() => createKey({ userId: admin.id, scopes: ['gps:read'] })));
    redis.freeze();
    let api: Awaited<ReturnType<typeof startSecondApi>> | undefined;
    try {
      api = await startSecondApi(s);
      const del = (id: string) =>
        fetch(`${api!.url}/v1/api-keys/${id}`, {
          method: 'DELETE',
          headers: { authorization: `Bearer ${admin.token}` },
        });
      const took: number[] = [];
      for (const k of keys) {
        const { result, ms } = await timed(() => del(k.id));
        t.is(result.status, 204);
        took.push(Math.round(ms));
      }
      // The first waits for the subscription and one command timeout; later ones wait for neither.
      t.true(took[0] < 1800, `took ${took.join(', ')} ms`);
      t.true(
        took.slice(1).every((ms) => ms < 500),
        `took ${took.join(', ')} ms`,
      );
    } finally {
      redis.thaw();
      await api?.close();
    }
  },
);

test.serial('a password reset answered 503 gives its mail slot back: the retry is mailed', async (t) => {
  const known = await createUser(s.db, { email: freshEmail('reset503') });
  // The outbox write fails as it does while the database is unreachable (SQLSTATE 57P03).
  await s.db.raw(`CREATE OR REPLACE FUNCTION test_fail_reset() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'the database is starting up' USING ERRCODE = '57P03'; END $$`);
  await s.db.raw(`CREATE TRIGGER test_fail_reset BEFORE INSERT ON side_effect_outbox FOR EACH ROW
    WHEN (NEW.kind = 'passwordReset') EXECUTE FUNCTION test_fail_reset()`);
  try {
    const refused = await s.request('POST', '/v1/auth/reset-password/request', { body: { email: known.email } });
    t.is(refused.status, 503, refused.text);
  } finally {
    await s.db.raw('DROP TRIGGER test_fail_reset ON side_effect_outbox');
    await s.db.raw('DROP FUNCTION test_fail_reset()');
  }
  const retry = await s.request('POST', '/v1/auth/reset-password/request', { body: { email: known.email } });
  t.is(retry.status, 202, retry.text);
  const mail = await box.waitFor(known.email, (m) => m.subject === 'Reset your password', 30_000);
  t.truthy(mail);
});
