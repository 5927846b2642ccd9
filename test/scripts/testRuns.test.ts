import test from 'ava';
import path from 'node:path';
import { createUser } from '../helpers/factories';
import { adminKnex, testDbSettings } from '../helpers/db';
import { deleteKeysWithPrefix, startStack } from '../helpers/stack';
import Redis from 'ioredis';
import { runToEnd } from '../helpers/processes';

const PREPARE = path.resolve(__dirname, '../helpers/prepare.js');

async function keysWithPrefix(redisUrl: string, prefix: string): Promise<string[]> {
  const redis = new Redis(redisUrl);
  try {
    const found: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      found.push(...keys);
    } while (cursor !== '0');
    return found;
  } finally {
    redis.disconnect();
  }
}

async function databaseExists(name: string): Promise<boolean> {
  const admin = adminKnex();
  try {
    return (await admin.raw('SELECT 1 FROM pg_database WHERE datname = ?', [name])).rows.length > 0;
  } finally {
    await admin.destroy();
  }
}

test('a closed stack leaves no Redis key under its prefix and drops its database', async (t) => {
  const s = await startStack({ workers: true, realtime: 1 });
  const { redisUrl, redisPrefix } = s.config;
  const dbName = decodeURIComponent(new URL(s.config.databaseUrl).pathname.slice(1));
  t.true(dbName.startsWith(testDbSettings().runPrefix), dbName);
  try {
    const user = await createUser(s.db);
    // Rate-limit counters, a WebSocket ticket, BullMQ queues (an email job), realtime stats.
    t.is((await s.request('GET', '/v1/users/me', { token: user.token })).status, 200);
    t.is((await s.request('POST', '/v1/ws/ticket', { token: user.token })).status, 201);
    t.is((await s.request('POST', '/v1/auth/reset-password/request', { body: { email: user.email } })).status, 202);
    await s.api.services.queues.enqueueAndWait('scheduled', { task: 'cleanupSessions' }, 10_000);
    const before = await keysWithPrefix(redisUrl, redisPrefix);
    t.true(
      before.some((k) => k.startsWith(`${redisPrefix}bull:`)),
      before.join(' '),
    );
    t.true(before.length > 5, before.join(' '));
  } finally {
    await s.close();
  }
  t.deepEqual(await keysWithPrefix(redisUrl, redisPrefix), []);
  t.false(await databaseExists(dbName));
});

test('deleteKeysWithPrefix deletes only keys under the prefix, glob characters taken literally', async (t) => {
  const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  const redis = new Redis(url);
  const tag = `t:${process.pid}${Date.now().toString(36)}`;
  try {
    await redis.set(`${tag}:a*:one`, '1');
    await redis.set(`${tag}:a*:two`, '1');
    await redis.set(`${tag}:ab:other`, '1', 'EX', 60);
    t.is(await deleteKeysWithPrefix(url, `${tag}:a*:`), 2);
    t.deepEqual(await keysWithPrefix(url, `${tag}:`), [`${tag}:ab:other`]);
  } finally {
    await redis.del(`${tag}:ab:other`);
    redis.disconnect();
  }
});

test('preparing a run drops stale databases of crashed runs but not those of a run still going', async (t) => {
  const s = testDbSettings();
  const young = `${s.baseName}_t_youngrun${process.pid}_x`;
  const stale = `${s.baseName}_t_stalerun${process.pid}_x`;
  const admin = adminKnex();
  try {
    for (const name of [young, stale]) await admin.raw('CREATE DATABASE ??', [name]);
    await admin.raw(`COMMENT ON DATABASE ?? IS 'test database created ${new Date().toISOString()}'`, [young]);
    await admin.raw(
      `COMMENT ON DATABASE ?? IS 'test database created ${new Date(Date.now() - 7 * 3600_000).toISOString()}'`,
      [stale],
    );
  } finally {
    await admin.destroy();
  }
  try {
    // `--cleanup` for a run of its own: the same leftover rules as a new run's preparation, without building a template.
    const r = await runToEnd(process.execPath, [PREPARE, '--cleanup'], {
      env: { ...process.env, TEST_RUN_ID: `other${process.pid}` },
    });
    t.is(r.status, 0, r.stderr);
    t.true(await databaseExists(young));
    t.false(await databaseExists(stale));
    // This run's own template is still there for the other test files.
    t.true(await databaseExists(s.template));
  } finally {
    const a = adminKnex();
    await a.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [young]);
    await a.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [stale]);
    await a.destroy();
  }
});

test('deleteKeysWithPrefix on a Redis that does not answer deletes nothing and does not throw', async (t) => {
  t.is(await deleteKeysWithPrefix('redis://127.0.0.1:1', 't:none:'), 0);
});
