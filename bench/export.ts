/**
 * Data export benchmark (npm run bench:export): GET /v1/user/export against a real api and one
 * worker (in this process, as `npm start` runs one worker process by default) with Debian's Chromium.
 *
 * Fixture: users with 10 API keys, 50 sessions and 500 audit events each, in a throw-away database
 * (migrated and seeded here, dropped at the end unless KEEP_DB=1) and Redis prefix (deleted at the
 * end). Measures:
 *   1. cold   the first export of the process: the browser is not started yet
 *   2. warm   BENCH_WARM (20) exports one after another with the browser running: median and p95
 *   3. rate   BENCH_SECONDS (30) of exports by WORKER_CONCURRENCY (4) distinct users at once:
 *             exports per minute of one worker process
 * TTFB is the time until the response headers arrive; the archive is sent whole once built, so
 * TTFB and total differ by the transfer of the ZIP.
 *
 * Environment: DATABASE_URL / REDIS_URL, CHROMIUM_PATH, EXPORT_PDF_MAX_PAGES, WORKER_CONCURRENCY,
 * BENCH_WARM, BENCH_SECONDS.
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { startApi } from '../api/server';
import { createApiKey } from '../shared/commands/apiKeys';
import { createSession } from '../shared/commands/sessions';
import { loadConfig } from '../shared/config';
import { startWorkers } from '../workers/index';
import { benchCleanup, freshBenchDatabase } from './benchDatabase';

const WARM = Number(process.env.BENCH_WARM || 20);
const SECONDS = Number(process.env.BENCH_SECONDS || 30);

/** A user with the benchmark's fixture; returns a session token. */
async function fixtureUser(db: Knex, n: number): Promise<string> {
  const [user] = await db('users')
    .insert({ username: `bench_export_${n}` })
    .returning('id');
  const platform = await db('platforms').where('slug', 'email').first('id');
  const [account] = await db('platform_accounts')
    .insert({
      user_id: user.id,
      platform_id: platform.id,
      platform_user_id: `bench${n}@example.test`,
      is_oauth: false,
      is_primary: true,
      username: `bench_export_${n}`,
      email: `bench${n}@example.test`,
      email_verified_at: new Date(),
    })
    .returning('id');
  await db('users').where('id', user.id).update({ primary_platform_account_id: account.id });
  await db('user_roles').insert({ user_id: user.id, role_id: 'role_user' });
  for (let i = 0; i < 10; i++)
    await createApiKey({ userId: user.id, name: `key ${i}`, scopes: ['gps:read', 'devices:read'] }, db);
  let token = '';
  for (let i = 0; i < 50; i++) {
    const s = await createSession(db, user.id, new Date(Date.now() + 86400_000), {
      ipAddress: `198.51.100.${i + 1}`,
      userAgent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
      platformSlug: 'email',
    });
    token = s.token;
  }
  await db('audit_events').insert(
    Array.from({ length: 500 }, (_, i) => ({
      user_id: user.id,
      event_type: i % 2 ? 'login' : 'api_key_created',
      actor_id: user.id,
      ip_address: '198.51.100.1',
      description: `bench event ${i}`,
      metadata: JSON.stringify({ i }),
    })),
  );
  return token;
}

interface Timing {
  ttfbMs: number;
  totalMs: number;
  bytes: number;
}

async function exportOnce(url: string, token: string): Promise<Timing> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/user/export`, { headers: { authorization: `Bearer ${token}` } });
  const ttfbMs = performance.now() - t0;
  const body = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) throw new Error(`export answered ${res.status}: ${body.toString().slice(0, 200)}`);
  return { ttfbMs, totalMs: performance.now() - t0, bytes: body.length };
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const ms = (v: number) => `${v.toFixed(0)} ms`;

async function main(): Promise<void> {
  const prefix = `bench:export:${randomBytes(4).toString('hex')}:`;
  const env = {
    ...process.env,
    REDIS_PREFIX: prefix,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: process.env.LOG_LEVEL || 'warn',
    EXPORT_RATE_LIMIT_PER_HOUR: '1000000',
  } as Record<string, string>;
  const { url: databaseUrl, db } = await freshBenchDatabase('bench_export', env);
  const config = loadConfig({ ...env, DATABASE_URL: databaseUrl });
  let api: Awaited<ReturnType<typeof startApi>> | undefined;
  let workers: Awaited<ReturnType<typeof startWorkers>> | undefined;
  const cleanup = benchCleanup({ url: databaseUrl, redisUrl: config.redisUrl, redisPrefix: prefix }, async () => {
    // The worker and the api (and their browser) stop before their database and Redis keys go.
    await workers?.close();
    await api?.close();
    await db.destroy();
  });
  try {
    const users = Math.max(1, config.workerConcurrency);
    process.stdout.write(`fixtures: ${users + 1} users × (10 API keys, 50 sessions, 500 audit events)…\n`);
    const tokens: string[] = [];
    for (let i = 0; i <= users; i++) tokens.push(await fixtureUser(db, i));
    api = await startApi(config, { port: 0, drainIdleGraceMs: 0 });
    workers = await startWorkers(config, { schedule: false });
    const url = `http://127.0.0.1:${api.port}`;
    const cold = await exportOnce(url, tokens[0]);
    const warm: Timing[] = [];
    for (let i = 0; i < WARM; i++) warm.push(await exportOnce(url, tokens[0]));

    let done = 0;
    const until = Date.now() + SECONDS * 1000;
    const started = performance.now();
    await Promise.all(
      tokens.slice(1).map(async (token) => {
        while (Date.now() < until) {
          await exportOnce(url, token);
          done++;
        }
      }),
    );
    const minutes = (performance.now() - started) / 60_000;

    const rows = [
      ['cold (browser not started)', ms(cold.ttfbMs), ms(cold.totalMs), `${cold.bytes} B`],
      [
        `warm median (n=${WARM})`,
        ms(
          quantile(
            warm.map((w) => w.ttfbMs),
            0.5,
          ),
        ),
        ms(
          quantile(
            warm.map((w) => w.totalMs),
            0.5,
          ),
        ),
        `${warm[0].bytes} B`,
      ],
      [
        'warm p95',
        ms(
          quantile(
            warm.map((w) => w.ttfbMs),
            0.95,
          ),
        ),
        ms(
          quantile(
            warm.map((w) => w.totalMs),
            0.95,
          ),
        ),
        '',
      ],
    ];
    process.stdout.write('\nGET /v1/user/export (one worker process, api in the same process)\n');
    process.stdout.write(`${'run'.padEnd(30)}${'TTFB'.padStart(10)}${'total'.padStart(10)}${'size'.padStart(12)}\n`);
    for (const r of rows)
      process.stdout.write(`${r[0].padEnd(30)}${r[1].padStart(10)}${r[2].padStart(10)}${r[3].padStart(12)}\n`);
    process.stdout.write(
      `\nthroughput: ${done} exports in ${(minutes * 60).toFixed(1)} s by ${users} users at once → ` +
        `${(done / minutes).toFixed(0)} exports/minute per worker process ` +
        `(WORKER_CONCURRENCY ${config.workerConcurrency}, EXPORT_PDF_MAX_PAGES ${config.dataExport.pdfMaxPages})\n`,
    );
  } finally {
    await cleanup();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err?.stack ?? err}\n`);
    process.exit(1);
  },
);
