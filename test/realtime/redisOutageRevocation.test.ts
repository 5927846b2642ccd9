import test from 'ava';
import Redis from 'ioredis';
import { createKey, createUser } from '../helpers/factories';
import { PrivateRedis, startPrivateRedis } from '../helpers/redisServer';
import { Stack, startStack } from '../helpers/stack';
import { startSecondApi } from '../helpers/secondApi';
import { connect, wsBase } from '../helpers/wsClient';
import { orAfter } from '../helpers/wait';

/**
 * A credential narrowed while Redis cannot carry the invalidation (stopped, or frozen with its
 * connections open): the change still reaches every instance once Redis answers again. The api
 * keeps the undelivered invalidation in the side-effect outbox, and realtime re-checks every open
 * socket when its invalidation subscription comes back. One private redis-server: serial.
 */
let redis: PrivateRedis;
let s: Stack;

test.before(async () => {
  redis = await startPrivateRedis();
  s = await startStack({ env: { REDIS_URL: redis.url }, realtime: 1 });
});
test.after.always(async () => {
  redis?.thaw();
  await redis?.start().catch(() => undefined);
  await s?.close();
  await redis?.stop();
});

const READER = ['role_user', 'role_api_read_only'];

for (const fault of ['stopped', 'frozen'] as const) {
  test.serial(
    `Redis ${fault}: an API key deleted and a session revoked meanwhile close their open sockets once it is back`,
    async (t) => {
      const admin = await createUser(s.db, { roles: ['role_admin'] });
      const user = await createUser(s.db, { roles: READER });
      const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
      const byKey = await connect(wsBase(s), { token: key.key });
      const bySession = await connect(wsBase(s), { token: user.token });
      const sub = await byKey.subscribe('gps');
      t.is(sub.type, 'message', JSON.stringify(sub));

      if (fault === 'stopped') await redis.stop();
      else redis.freeze();
      try {
        const del = await s.request('DELETE', `/v1/api-keys/${key.id}`, { token: admin.token });
        t.is(del.status, 204, del.text);
        const revoke = await s.request('DELETE', `/v1/sessions/${user.token}?reason=revoked`, { token: s.systemKey });
        t.is(revoke.status, 204, revoke.text);
        // REST refuses both at once on this instance.
        t.is((await s.request('GET', '/v1/gps', { token: key.key })).status, 401);
        // The invalidations wait in the outbox for Redis.
        t.truthy(await s.db('side_effect_outbox').where('kind', 'authInvalidation').first());
      } finally {
        if (fault === 'stopped') await redis.start();
        else redis.thaw();
      }
      const closedWithin = (c: typeof byKey) => orAfter(c.closed, 15_000, { code: 0 });
      const [k, u] = await Promise.all([closedWithin(byKey), closedWithin(bySession)]);
      t.is(k.code, 4001, 'the deleted key’s socket is closed');
      t.true([4001, 4004].includes(u.code), `the revoked session’s socket is closed (got ${u.code})`);
      // Relayed, then gone from the outbox.
      for (let i = 0; i < 100; i++) {
        if (!(await s.db('side_effect_outbox').where('kind', 'authInvalidation').first())) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      t.falsy(await s.db('side_effect_outbox').where('kind', 'authInvalidation').first());
    },
  );
}

test.serial(
  'Redis frozen: a key deleted and a session revoked on one api are refused at once on another',
  async (t) => {
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    const user = await createUser(s.db, { roles: READER });
    const key = await createKey({ userId: user.id, scopes: ['gps:read'] });
    const second = await startSecondApi(s);
    const onSecond = async (token: string) =>
      (await fetch(`${second.url}/v1/gps`, { headers: { authorization: `Bearer ${token}` } })).status;
    try {
      // Both credentials are cached on the second api.
      t.is(await onSecond(key.key), 200);
      t.is(await onSecond(user.token), 200);
      redis.freeze();
      try {
        const del = await s.request('DELETE', `/v1/api-keys/${key.id}`, { token: admin.token });
        t.is(del.status, 204, del.text);
        const revoke = await s.request('DELETE', `/v1/sessions/${user.token}?reason=revoked`, { token: s.systemKey });
        t.is(revoke.status, 204, revoke.text);
        // The second api heard nothing; it has stopped trusting its cache by the time the changes answered.
        t.is(await onSecond(key.key), 401);
        t.is(await onSecond(user.token), 401);
      } finally {
        redis.thaw();
      }
      // Once Redis answers again the second api caches again, and still refuses both.
      t.is(await onSecond(key.key), 401);
      t.is(await onSecond(user.token), 401);
    } finally {
      await second.close();
    }
  },
);

test.serial(
  'Redis frozen: a demotion on one api holds on another, and the demoted socket gets no admin push after',
  async (t) => {
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    const demoted = await createUser(s.db, { roles: ['role_admin'] });
    const second = await startSecondApi(s);
    const onSecond = async (token: string) =>
      (await fetch(`${second.url}/v1/permissions`, { headers: { authorization: `Bearer ${token}` } })).status;
    const socket = await connect(wsBase(s), { token: demoted.token });
    const ioPublisher = new Redis(redis.url, { maxRetriesPerRequest: null });
    ioPublisher.on('error', () => undefined);
    try {
      await ioPublisher.ping();
      t.is(await onSecond(demoted.token), 200);
      t.is((await socket.subscribe('admin:audit')).type, 'message');
      redis.freeze();
      try {
        const r = await s.request('DELETE', `/v1/users/${demoted.id}/roles/role_admin`, { token: admin.token });
        t.is(r.status, 204, r.text);
        t.is(await onSecond(demoted.token), 403, 'the permission set cached on the second api is not used');
        // A push published after the change answered, waiting in the frozen Redis: it reaches realtime
        // as Redis answers, racing the heartbeat that tells realtime to re-check its sockets.
        void ioPublisher.publish(
          `${s.config.redisPrefix}ws:admin:audit`,
          JSON.stringify({ type: 'auditEvent', data: {} }),
        );
      } finally {
        redis.thaw();
      }
      // Audit events written during the hang are pushed once Redis answers: not to the demoted socket.
      const revoked = await socket.nextJson((m) => m.type === 'error', 10_000);
      t.is(revoked.message, 'access to channel admin:audit revoked');
      t.true(await socket.nothing((f) => f.kind === 'json' && f.data.type === 'auditEvent', 1500));
    } finally {
      socket.close();
      ioPublisher.disconnect();
      await second.close();
    }
  },
);

test.serial(
  'Redis silent for over a second while the heartbeats ran late: its next answer drops the cache all the same',
  async (t) => {
    const user = await createUser(s.db, { roles: READER });
    t.is((await s.request('GET', '/v1/gps', { token: user.token })).status, 200);
    const credentials = s.api.services.credentials;
    t.true(credentials.cacheStats().entries > 0);
    let deaf = 0;
    credentials.onDeaf(() => deaf++);
    redis.freeze();
    try {
      // This test runs in the api's process: a machine too busy to run it on time. Each turn blocks
      // 450 ms, so each heartbeat runs late: four of them in about two seconds of silence, which the
      // per-PING count (missedBeats × 250 ms) makes 750 ms, short of the second it takes.
      for (let i = 0; i < 4; i++) {
        const until = Date.now() + 450;
        while (Date.now() < until);
        await new Promise((r) => setTimeout(r, 0));
      }
      t.is(deaf, 0, 'the heartbeats alone did not count the silence out');
    } finally {
      redis.thaw();
    }
    for (let i = 0; i < 100 && credentials.silentForMs() > 200; i++) await new Promise((r) => setTimeout(r, 20));
    t.true(credentials.silentForMs() <= 200, 'Redis answers again');
    t.is(deaf, 1, 'the answer after a silence of wall-clock seconds is taken as the end of a deafness');
    t.is(credentials.cacheStats().entries, 0, 'what was cached before the silence is dropped');
  },
);

test.serial('a process too busy to read the heartbeat for over a second keeps its credential cache', async (t) => {
  const user = await createUser(s.db, { roles: READER });
  t.is((await s.request('GET', '/v1/gps', { token: user.token })).status, 200);
  const credentials = s.api.services.credentials;
  t.true(credentials.cacheStats().entries > 0);
  // This test runs in the api's process: block its event loop for 1.5 s.
  const until = Date.now() + 1500;
  while (Date.now() < until);
  await new Promise((r) => setTimeout(r, 600));
  t.true(credentials.cacheStats().entries > 0, 'not dropped: Redis answered as soon as the loop could read it');
});
