import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import type { ExecutionContext } from 'ava';
import type { Knex } from 'knex';
import Redis from 'ioredis';
import { startApi, RunningApi } from '../../api/server';
import { Config, loadConfig } from '../../shared/config';
import { startRealtime, RunningRealtime } from '../../realtime/server';
import type { RunningWorkers } from '../../workers/index';
import { ApiClient, CallAuth } from '../../shared/client';
import { createTestDatabase, testRunId } from './db';
import { cachedOpenApiDocument, ResponseChecker, responseChecker } from './openapiCheck';

export interface HttpResult<T = any> {
  status: number;
  body: T;
  headers: Headers;
  text: string;
}

export interface RequestOptions {
  token?: string;
  body?: unknown;
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface Stack {
  config: Config;
  /** The environment the stack's config was loaded from: start a service process with it to join the stack. */
  env: Record<string, string>;
  api: RunningApi;
  url: string;
  db: Knex;
  redis: Redis;
  realtime: RunningRealtime[];
  workers?: RunningWorkers;
  systemKey: string;
  request<T = any>(method: string, path: string, opts?: RequestOptions): Promise<HttpResult<T>>;
  close(): Promise<void>;
}

export interface StackOptions {
  env?: Record<string, string>;
  /** Start the BullMQ workers in-process. */
  workers?: boolean;
  /** Number of realtime instances to start (0 = none). */
  realtime?: number;
}

/** The cheap argon2id cost of test stacks (PASSWORD_HASH_*; production refuses it). */
const TEST_PASSWORD_HASHING = {
  PASSWORD_HASH_MEMORY_KIB: '1024',
  PASSWORD_HASH_TIME_COST: '1',
  PASSWORD_HASH_PARALLELISM: '1',
};

/**
 * A complete, isolated service for one test file: its own database (copied from the template),
 * its own Redis prefix, the api on an ephemeral port, and optionally workers and realtime.
 */
export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const database = await createTestDatabase();
  const systemKey = `system-${randomBytes(24).toString('hex')}`;
  const baseEnv: Record<string, string> = {
    NODE_ENV: 'test',
    DATABASE_URL: database.url,
    DATABASE_POOL_MAX: '5',
    REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379',
    // Under the run's id: keys a process writes after its stack closed are deleted with the run.
    REDIS_PREFIX: `${runRedisPrefix()}${randomBytes(5).toString('hex')}:`,
    SYSTEM_API_KEY: systemKey,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL || 'silent',
    PORT: '0',
    HOST: '127.0.0.1',
    // argon2id at its smallest cost (1 MiB, one pass, one lane), unless the stack runs as production
    // (which refuses it): the suite hashes and verifies passwords over a thousand times, and at the
    // production default each one is a third of a second of CPU.
    ...(opts.env?.NODE_ENV === 'production' ? {} : TEST_PASSWORD_HASHING),
    ...opts.env,
  };
  const realtime: RunningRealtime[] = [];
  let env = baseEnv;
  let config = loadConfig(env);
  let api: RunningApi | undefined;
  let workers: RunningWorkers | undefined;
  // Closes what has started, in reverse, and drops the database: the stack's own close, and the
  // clean-up of a start that failed half-way (whose servers would otherwise keep the test worker,
  // and with it the whole run, from ever exiting).
  const teardown = async () => {
    await workers?.close();
    await api?.close();
    for (const r of realtime) await r.close();
    await database.drop();
    await deleteKeysWithPrefix(config.redisUrl, config.redisPrefix);
  };
  let checker: ResponseChecker;
  try {
    for (let i = 0; i < (opts.realtime ?? 0); i++) realtime.push(await startRealtime(config, { port: 0 }));
    if (realtime.length) {
      env = { ...baseEnv, REALTIME_PORT: String(realtime[0].port) };
      config = loadConfig(env);
    }
    // Closing a test stack need not wait for requests a client may have on the wire (the production
    // grace is tested in test/api/drain.test.ts): idle keep-alive sockets are closed at once.
    api = await startApi(config, { port: 0, drainIdleGraceMs: 0 });
    // Loaded only by files that run workers: their modules (archiver, the processors) cost the others ~0.3 s.
    workers = opts.workers
      ? await (await import('../../workers/index')).startWorkers(config, { schedule: false })
      : undefined;
    // Every 2xx JSON answer a test receives must match the schema the OpenAPI document gives its
    // route and status: a mismatch fails the test that made the request.
    // Built before the first request (document and schemas), so no test times its construction.
    checker = responseChecker(cachedOpenApiDocument(api.services.version) as never);
  } catch (err) {
    await teardown().catch(() => undefined);
    throw err;
  }
  const started = api;
  const url = `http://127.0.0.1:${started.port}`;

  // Requests go through the first-party client (shared/client), so every test that talks HTTP
  // exercises it against the real server: a token is the user's (or the system key), no token is
  // an explicit anonymous call. Only a test that sends its own Authorization header (a malformed
  // credential on purpose) bypasses the client, which never lets a hand-made header through.
  const client = new ApiClient({ baseUrl: url });
  async function request<T>(method: string, path: string, o: RequestOptions = {}): Promise<HttpResult<T>> {
    const rawAuthorization = Object.keys(o.headers ?? {}).some((k) => k.toLowerCase() === 'authorization');
    const auth: CallAuth = !o.token
      ? { anonymous: true }
      : o.token === systemKey
        ? { systemKey }
        : { userToken: o.token };
    const res = rawAuthorization
      ? await rawRequest(url + path, method, o)
      : await client.request(method, path, { auth, body: o.body, rawBody: o.rawBody, headers: o.headers });
    const result = { status: res.status, body: res.body as T, headers: res.headers, text: res.text };
    checkDocumented(method, path, result);
    return result;
  }

  function checkDocumented(method: string, path: string, r: HttpResult): void {
    if (r.status < 200 || r.status >= 300 || !/^application\/json\b/.test(r.headers.get('content-type') ?? '')) return;
    const problem = checker.check(method, path, r.status, r.body);
    if (problem) throw new Error(`response does not match the OpenAPI document: ${problem}`);
    // What an answer names as the resource itself (`_links.self`, a 201's Location) must be
    // fetchable: a hypermedia link to a path without GET (405) is of no use to the client.
    const self = (r.body as { _links?: { self?: unknown } } | null)?._links?.self;
    for (const link of [typeof self === 'string' ? self : null, r.headers.get('location')])
      if (link?.startsWith('/') && !checker.readable(link))
        throw new Error(`${method} ${path}: its self link ${link} is no documented GET route`);
  }

  return {
    config,
    env,
    api: started,
    url,
    db: started.services.db,
    redis: started.services.redis,
    realtime,
    workers,
    systemKey,
    request,
    close: teardown,
  };
}

/** The Redis prefix of this test run's stacks (`t:<run id>:`), which the run's cleanup deletes. */
export const runRedisPrefix = (runId = testRunId()) => `t:${runId}:`;

const globEscape = (s: string) => s.replace(/[*?[\]\\]/g, '\\$&');

/**
 * Deletes every Redis key under `prefix` (SCAN + UNLINK, BullMQ's `<prefix>bull:*` included), so a
 * test file leaves nothing behind. Returns how many keys it deleted. A Redis that does not answer
 * (a stack pointed at a dead port on purpose) holds nothing of the stack: 0.
 */
export async function deleteKeysWithPrefix(redisUrl: string, prefix: string): Promise<number> {
  if (!prefix) throw new Error('refusing to delete every key: empty prefix');
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
  } catch {
    redis.disconnect();
    return 0;
  }
  let deleted = 0;
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${globEscape(prefix)}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) deleted += await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  return deleted;
}

/** A request with a hand-made Authorization header, sent as is (see Stack.request). */
async function rawRequest(
  target: string,
  method: string,
  o: RequestOptions,
): Promise<{ status: number; body: unknown; headers: Headers; text: string }> {
  const headers: Record<string, string> = { ...(o.headers ?? {}) };
  if (o.token) headers.authorization = `Bearer ${o.token}`;
  let body: string | undefined = o.rawBody;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] = 'application/json';
  } else if (o.rawBody !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
  const res = await fetch(target, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed, headers: res.headers, text };
}

/** Starts a stack before the file's tests and closes it after them. */
export function useStack(
  test: {
    before: (fn: (t: ExecutionContext) => Promise<void>) => void;
    after: { always: (fn: () => Promise<void>) => void };
  },
  opts: StackOptions = {},
): () => Stack {
  let stack: Stack | undefined;
  test.before(async () => {
    stack = await startStack(opts);
  });
  test.after.always(async () => {
    await stack?.close();
  });
  return () => {
    if (!stack) throw new Error('stack not started');
    return stack;
  };
}
