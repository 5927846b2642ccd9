import test from 'ava';
import knex from 'knex';
import { randomBytes, randomUUID } from 'node:crypto';
import net from 'node:net';
import { Model } from 'objection';
import { probesFor } from '../../api/routes/health';
import { startApi } from '../../api/server';
import { loadConfig } from '../../shared/config';
import { sha256 } from '../../shared/crypto';
import { toHttpError } from '../../shared/errors';
import { Device } from '../../shared/models/Device';
import { User } from '../../shared/models/User';
import { adminKnex } from '../helpers/db';
import { createUser } from '../helpers/factories';
import { runRedisPrefix, useStack } from '../helpers/stack';

// Serial: one test takes the database away from the whole file's stack.
const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000' } });

/** The error a promise rejects with. */
async function failure(p: PromiseLike<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a failure');
}

test.serial('concurrent claims of one username: exactly one 200, every other a 409', async (t) => {
  const s = stack();
  const users = await Promise.all(Array.from({ length: 15 }, () => createUser(s.db)));
  const name = `race_${randomBytes(4).toString('hex')}`;
  const answers = await Promise.all(
    users.map((u) => s.request('PATCH', `/v1/users/${u.id}/username`, { token: u.token, body: { username: name } })),
  );
  const statuses = answers.map((r) => r.status).sort();
  t.deepEqual(statuses, [200, ...Array(14).fill(409)], answers.map((r) => r.text).join('\n'));
  for (const r of answers.filter((a) => a.status === 409)) {
    t.is(r.body.error, 'Conflict');
    t.regex(r.body.message, /username/);
  }
  // Case-insensitively unique, also through PATCH /v1/users/{id}.
  const upper = name.toUpperCase();
  const more = await Promise.all(
    users
      .slice(0, 5)
      .map((u) => s.request('PATCH', `/v1/users/${u.id}`, { token: u.token, body: { username: upper } })),
  );
  t.true(
    more.every((r) => r.status === 409 || (r.status === 200 && r.body.data.username === upper)),
    more.map((r) => r.text).join('\n'),
  );
});

test.serial('constraint and data errors map to their status whatever wraps them', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const cases: Array<[string, () => PromiseLike<unknown>, number, RegExp]> = [
    [
      'unique (Objection UniqueViolationError)',
      () => User.query().patch({ username: user.username.toUpperCase() }).where('id', '<>', user.id),
      409,
      /username: already exists/,
    ],
    ['unique (knex)', () => s.db('users').insert({ username: user.username }), 409, /username: already exists/],
    [
      // The index on lower(normalize(name, NFKC)): the field, not the function's other arguments.
      'unique expression index (knex)',
      () => s.db('roles').insert({ id: 'role_full_width_admin', name: '\uFF21\uFF24\uFF2D\uFF29\uFF2E' }),
      409,
      /^name: already exists$/,
    ],
    [
      'foreign key, missing reference',
      () => s.db('user_roles').insert({ user_id: randomUUID(), role_id: 'role_user' }),
      400,
      /^user_id: no such user$/,
    ],
    [
      'foreign key, missing reference into a table without a noun',
      () => s.db('chat_roles').insert({ guild_id: randomUUID(), role_id: 'r', name: 'r' }),
      400,
      /^guild_id: referenced record does not exist$/,
    ],
    ['foreign key, still referenced', () => s.db('platforms').where('slug', 'email').delete(), 409, /still in use/],
    [
      'not null (Objection NotNullViolationError)',
      () => Device.query().insert({ name: null } as never),
      400,
      /name: is required/,
    ],
    ['invalid text representation', () => s.db('users').where('id', 'not-a-uuid').first(), 400, /invalid value/],
    ['string too long', () => s.db('platforms').insert({ slug: 'x'.repeat(51), name: 'x' }), 400, /too long/],
    ['NUL in text', () => s.db('devices').insert({ name: 'a\u0000b' }), 400, /NUL/],
    [
      // PostgreSQL aborts one of two transactions that wait for each other (SQLSTATE 40P01).
      'deadlock',
      () => s.db.raw(`DO $$ BEGIN RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01'; END $$`),
      409,
      /concurrent change.*try again/,
    ],
    [
      'serialization failure',
      () => s.db.raw(`DO $$ BEGIN RAISE EXCEPTION 'could not serialize' USING ERRCODE = '40001'; END $$`),
      409,
      /concurrent change.*try again/,
    ],
  ];
  // A server that takes connections and never answers: pg gives up connecting ('timeout expired').
  const silent = net.createServer(() => undefined);
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  const mute = knex({
    client: 'pg',
    connection: {
      host: '127.0.0.1',
      port: (silent.address() as net.AddressInfo).port,
      user: 'x',
      database: 'x',
      connectionTimeoutMillis: 200,
    },
    pool: { min: 0, max: 1 },
  });
  cases.push(['connect timeout', () => mute.raw('select 1'), 503, /^the database is unreachable/]);
  // A server that took the statement and stopped answering (pg's query_timeout): it may still
  // commit it when it resumes, so a write is not called undone ("try again" would duplicate it).
  const slow = knex({
    client: 'pg',
    connection: { connectionString: s.config.databaseUrl, query_timeout: 100 },
    pool: { min: 0, max: 1 },
  });
  cases.push([
    'query read timeout',
    () => slow.raw('select pg_sleep(0.5)'),
    503,
    /stopped answering; a change this request made may still be applied.*check before repeating it/,
  ]);
  t.teardown(async () => {
    await mute.destroy();
    await slow.destroy();
    silent.close();
  });
  for (const [name, run, status, message] of cases) {
    const err = await failure(run());
    for (const wrapped of [err, new Error('wrapper', { cause: err })]) {
      const mapped = toHttpError(wrapped);
      t.is(mapped?.status, status, `${name}: ${(err as Error).message}`);
      t.regex(mapped?.message ?? '', message, name);
    }
  }
  t.is(toHttpError(new Error('something else')), undefined);
  // A protocol violation (class 08, like the connection errors) is a fault of this service, not an outage.
  t.is(
    toHttpError(Object.assign(new Error('bind message has 464 parameter formats but 0 parameters'), { code: '08P01' })),
    undefined,
  );
  t.is(
    toHttpError(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }))
      ?.status,
    503,
  );
});

test.serial(
  'PostgreSQL gone and back: 503 with Retry-After on database routes and health says so, then recovery',
  async (t) => {
    const s = stack();
    const admin = await createUser(s.db, { roles: ['role_admin'] });
    t.is((await s.request('GET', '/v1/devices', { token: admin.token })).status, 200);
    const database = new URL(s.config.databaseUrl).pathname.slice(1);
    const pg = adminKnex();
    try {
      // Every backend of the database is killed and no new one is let in, as during a restart.
      await pg.raw('ALTER DATABASE ?? ALLOW_CONNECTIONS false', [database]);
      await pg.raw(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid()',
        [database],
      );
      for (const [method, path, body] of [
        ['GET', '/v1/devices', undefined],
        ['POST', '/v1/devices', { name: 'during outage' }],
        ['GET', `/v1/users/${admin.id}`, undefined],
      ] as const) {
        const started = Date.now();
        const r = await s.request(method, path, { token: admin.token, body });
        t.is(r.status, 503, `${method} ${path}: ${r.text}`);
        t.is(r.body.error, 'ServiceUnavailable');
        t.is(typeof r.body.message, 'string');
        t.is(r.headers.get('retry-after'), '5');
        t.true(Date.now() - started < 5000, `${method} ${path} took ${Date.now() - started} ms`);
      }
      const health = await s.request('GET', '/v1/health');
      t.is(health.status, 503);
      t.is(health.body.status, 'unhealthy');
      t.is(health.body.services.database.status, 'down');
      t.is(health.body.services.cache.status, 'ok');
    } finally {
      await pg.raw('ALTER DATABASE ?? ALLOW_CONNECTIONS true', [database]);
      await pg.destroy();
    }
    // Recovery without a restart: the pool replaces the dead connections.
    let last = 0;
    for (let i = 0; i < 50 && last !== 200; i++) {
      last = (await s.request('GET', '/v1/devices', { token: admin.token })).status;
      if (last !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    t.is(last, 200);
    t.is((await s.request('GET', '/v1/health')).status, 200);
  },
);

test.serial('an api whose database refuses connections answers 503 with Retry-After, fast', async (t) => {
  const s = stack();
  const config = loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nothing_listens',
    REDIS_URL: s.config.redisUrl,
    REDIS_PREFIX: `${runRedisPrefix()}${randomBytes(5).toString('hex')}:`,
    LOG_LEVEL: 'silent',
    PORT: '0',
    HOST: '127.0.0.1',
  });
  const api = await startApi(config, { port: 0 });
  try {
    const started = Date.now();
    const res = await fetch(`http://127.0.0.1:${api.port}/v1/devices`, {
      headers: { authorization: 'Bearer sess_whatever' },
    });
    const body = (await res.json()) as { error: string; message: string };
    t.is(res.status, 503, JSON.stringify(body));
    t.deepEqual(body, { error: 'ServiceUnavailable', message: body.message });
    t.is(res.headers.get('retry-after'), '5');
    t.true(Date.now() - started < 5000, `${Date.now() - started} ms`);
    const health = await fetch(`http://127.0.0.1:${api.port}/v1/health`);
    t.is(health.status, 503);
    t.is(((await health.json()) as { services: { database: { status: string } } }).services.database.status, 'down');
  } finally {
    await api.close();
    // startApi bound Objection's models to its own (now destroyed) pool: give them back.
    Model.knex(s.db);
  }
});

test.serial(
  'an api started while its database is unreachable serves 503, then stores SYSTEM_API_KEY once it is back',
  async (t) => {
    const s = stack();
    // A port nothing listens on yet; later a proxy to the real database opens on it.
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const url = new URL(s.config.databaseUrl);
    const realPort = Number(url.port || 5432);
    url.port = String(port);
    const systemKey = `sys-${randomBytes(12).toString('hex')}`;
    const config = loadConfig({
      NODE_ENV: 'test',
      DATABASE_URL: url.toString(),
      REDIS_URL: s.config.redisUrl,
      REDIS_PREFIX: `${runRedisPrefix()}${randomBytes(5).toString('hex')}:`,
      SYSTEM_API_KEY: systemKey,
      LOG_LEVEL: 'silent',
      PORT: '0',
      HOST: '127.0.0.1',
    });
    const api = await startApi(config, { port: 0 });
    const sockets = new Set<net.Socket>();
    const proxy = net.createServer((client) => {
      const upstream = net.connect(realPort, url.hostname);
      for (const x of [client, upstream]) sockets.add(x);
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    try {
      const asSystem = () =>
        fetch(`http://127.0.0.1:${api.port}/v1/users/email/nobody%40example.test`, {
          headers: { authorization: `Bearer ${systemKey}` },
        });
      t.is((await asSystem()).status, 503, 'no database: 503, not a refused connection');
      await new Promise<void>((r) => proxy.listen(port, '127.0.0.1', r));
      // Back: the key is stored by the retry, and the system key works (404: no such address).
      let status = 0;
      for (let i = 0; i < 100 && status !== 404; i++) {
        status = (await asSystem()).status;
        if (status !== 404) await new Promise((r) => setTimeout(r, 100));
      }
      t.is(status, 404);
      t.truthy(await s.db('api_keys').where('key_hash', sha256(systemKey)).first());
    } finally {
      await api.close();
      for (const x of sockets) x.destroy();
      await new Promise<void>((r) => proxy.close(() => r()));
      await s.db('api_keys').where('key_hash', sha256(systemKey)).delete();
      Model.knex(s.db);
    }
  },
);

test.serial(
  'health requests of one event-loop turn share one database probe, started after they arrived',
  async (t) => {
    const s = stack();
    const probes: string[] = [];
    const listener = (q: { sql: string }) => {
      if (q.sql === 'select 1') probes.push(q.sql);
    };
    const db = s.api.services.db;
    db.on('query', listener);
    try {
      // Asked in one turn (as the requests one I/O phase delivers): one probe, started after all of them.
      const run = probesFor(s.api.services);
      const shared = await Promise.all(Array.from({ length: 30 }, () => run()));
      t.is(probes.length, 1);
      t.true(shared.every((r) => r === shared[0] && r.database.status === 'ok'));
      // Asked again after it answered: a new probe.
      await run();
      t.is(probes.length, 2);
      // Over HTTP: every answer healthy, never more probes than requests.
      const answers = await Promise.all(Array.from({ length: 30 }, () => s.request('GET', '/v1/health')));
      for (const a of answers) t.is(a.body.services.database.status, 'ok');
      t.true(probes.length <= 2 + 30);
    } finally {
      db.off('query', listener);
    }
  },
);
