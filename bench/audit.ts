/**
 * Audit log benchmark (npm run bench:audit), against the real api on loopback:
 *
 *   1. seed    10,000 users and 1,000,000 audit events (COPY ... FROM STDIN with pg-copy-streams):
 *              one user has 5,000 events, the rest are spread over the others and over a year,
 *              0.1% are reported; then VACUUM ANALYZE, as autovacuum would after such a load.
 *   2. queries median and p95 over BENCH_RUNS (default 40) sequential requests each of the pages
 *              spec §4.24 names: GET /v1/admin/audit with no filter, user_search by email,
 *              event_type + a 30-day range, is_reported=true, each sort field; GET /v1/users/me/audit
 *              for the user with 5,000 events. Target: every p95 under 100 ms.
 *   3. writer  events per second through the buffered writer (AuditBuffer) into the same table.
 *
 * Environment: DATABASE_URL / REDIS_URL (as for the service), BENCH_RUNS (40), BENCH_WRITER_EVENTS (200,000).
 * The database `<name>_bench_audit` is created fresh and dropped at the end (KEEP_DB=1 keeps it), and so
 * are the run's Redis keys.
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom } from 'pg-copy-streams';
import type { PoolClient } from 'pg';
import { startApi } from '../api/server';
import { AUDIT_EVENT_TYPES } from '../shared/audit';
import { AuditBuffer } from '../shared/auditBuffer';
import { createSession } from '../shared/commands/sessions';
import { loadConfig } from '../shared/config';
import { createLogger } from '../shared/logger';
import { benchCleanup, freshBenchDatabase } from './benchDatabase';

const USERS = 10_000;
const EVENTS = 1_000_000;
const HEAVY_USER_EVENTS = 5_000;
const RUNS = Number(process.env.BENCH_RUNS || 40);
const WRITER_EVENTS = Number(process.env.BENCH_WRITER_EVENTS || 200_000);
const DAY = 86_400_000;

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Rows of audit_events as COPY text: one user with HEAVY_USER_EVENTS events, the rest spread. */
function* eventLines(userIds: string[], now: number): Generator<string> {
  const types = AUDIT_EVENT_TYPES;
  const sources = ['api', 'api', 'api', 'api', 'id', 'chat_bot'];
  for (let i = 0; i < EVENTS; i++) {
    const user = i < HEAVY_USER_EVENTS ? userIds[0]! : userIds[1 + (i % (userIds.length - 1))]!;
    const type = types[(i * 7919) % types.length]!;
    const failed = i % 20 === 0;
    const created = new Date(now - ((i * 104_729) % (365 * DAY))).toISOString();
    const ip = `${81 + (i % 100)}.${i % 256}.${(i >> 8) % 256}.${(i >> 16) % 256}`;
    yield (
      [
        user,
        type,
        'session',
        '\\N',
        user,
        ip,
        'bench-agent/1.0',
        '{}',
        failed ? 'failure' : 'success',
        failed ? 'wrong_password' : '\\N',
        sources[i % sources.length],
        i % 1000 === 0 ? 't' : 'f',
        created,
      ].join('\t') + '\n'
    );
  }
}

async function main() {
  const { url, db } = await freshBenchDatabase('bench_audit', { DATABASE_POOL_MAX: '10' });
  const redisPrefix = `bench-audit-${randomBytes(4).toString('hex')}:`;
  let api: Awaited<ReturnType<typeof startApi>> | undefined;
  const cleanup = benchCleanup({ url, redisUrl: process.env.REDIS_URL, redisPrefix }, async () => {
    await api?.close();
    await db.destroy();
  });
  try {
    const started = Date.now();
    await db.raw(`INSERT INTO users (username) SELECT 'bench_user_' || g FROM generate_series(1, ?) g`, [USERS]);
    await db.raw(
      `INSERT INTO platform_accounts (user_id, platform_id, platform_user_id, is_oauth, is_primary, username, email, email_verified_at)
       SELECT u.id, p.id, u.username || '@bench.test', false, true, u.username, u.username || '@bench.test', now()
       FROM users u, platforms p WHERE p.slug = 'email'`,
    );
    const userIds: string[] = await db('users').orderBy('username').pluck('id');
    const conn = (await db.client.acquireConnection()) as PoolClient;
    try {
      const copy = conn.query(
        copyFrom(
          `COPY audit_events (user_id, event_type, resource_type, resource_id, actor_id, ip_address, user_agent,
             metadata, status, error_message, source_service, is_reported, created_at) FROM STDIN`,
        ),
      );
      await pipeline(Readable.from(eventLines(userIds, Date.now())), copy);
    } finally {
      await db.client.releaseConnection(conn);
    }
    await db.raw('VACUUM ANALYZE audit_events');
    await db.raw('ANALYZE users');
    await db.raw('ANALYZE platform_accounts');
    console.log(`seeded ${USERS} users and ${EVENTS} events in ${((Date.now() - started) / 1000).toFixed(1)} s`);

    const [admin] = await db('users').insert({ username: 'bench_admin' }).returning('id');
    await db('user_roles').insert({ user_id: admin.id, role_id: 'role_admin' });
    const expires = new Date(Date.now() + DAY);
    const adminToken = (await createSession(db, admin.id, expires)).token;
    const heavyToken = (await createSession(db, userIds[0]!, expires)).token;

    const config = loadConfig({
      ...process.env,
      DATABASE_URL: url,
      REDIS_PREFIX: redisPrefix,
      RATE_LIMIT_USER: '1000000',
      LOG_LEVEL: 'warn',
      PORT: '0',
    });
    const server = await startApi(config, { port: 0 });
    api = server;
    const base = `http://127.0.0.1:${server.port}`;
    const from = new Date(Date.now() - 30 * DAY).toISOString();
    const to = new Date().toISOString();
    const email = 'bench_user_4242@bench.test';
    const cases: Array<[string, string, string]> = [
      ['admin, no filter', '/v1/admin/audit', adminToken],
      ['admin, user_search by email', `/v1/admin/audit?user_search=${encodeURIComponent(email)}`, adminToken],
      [
        'admin, event_type + 30-day range',
        `/v1/admin/audit?event_type=login&start_date=${from}&end_date=${to}`,
        adminToken,
      ],
      ['admin, is_reported=true', '/v1/admin/audit?is_reported=true', adminToken],
      ['admin, sort created_at asc', '/v1/admin/audit?sort_field=created_at&sort_direction=asc', adminToken],
      ['admin, sort event_type', '/v1/admin/audit?sort_field=event_type', adminToken],
      ['admin, sort user_id', '/v1/admin/audit?sort_field=user_id', adminToken],
      ['admin, sort status', '/v1/admin/audit?sort_field=status', adminToken],
      ['admin, sort status asc, page 50', '/v1/admin/audit?sort_field=status&sort_direction=asc&page=50', adminToken],
      ['admin, status=failure', '/v1/admin/audit?status=failure', adminToken],
      ['me, user with 5,000 events', '/v1/users/me/audit', heavyToken],
      ['me, 5,000 events, event_type', '/v1/users/me/audit?event_type=logout', heavyToken],
    ];
    const results: Array<Record<string, unknown>> = [];
    for (const [name, path, token] of cases) {
      const times: number[] = [];
      let body: { total_count?: number } = {};
      let estimated = false;
      for (let i = 0; i < RUNS + 3; i++) {
        const t0 = performance.now();
        const r = await fetch(base + path, { headers: { authorization: `Bearer ${token}` } });
        body = (await r.json()) as { total_count?: number };
        const ms = performance.now() - t0;
        if (r.status !== 200) throw new Error(`${name}: ${r.status} ${JSON.stringify(body)}`);
        estimated = r.headers.get('x-total-count-estimated') === 'true';
        if (i >= 3) times.push(ms);
      }
      times.sort((a, b) => a - b);
      results.push({
        query: name,
        'median ms': Number(quantile(times, 0.5).toFixed(1)),
        'p95 ms': Number(quantile(times, 0.95).toFixed(1)),
        total_count: body.total_count,
        estimated,
      });
    }
    console.table(results);
    const worst = Math.max(...results.map((r) => r['p95 ms'] as number));
    console.log(`worst p95 ${worst.toFixed(1)} ms (target < 100 ms): ${worst < 100 ? 'met' : 'NOT met'}`);
    api = undefined;
    await server.close();

    const buffer = new AuditBuffer({ db, logger: createLogger('bench', 'silent') });
    const t0 = performance.now();
    for (let i = 0; i < WRITER_EVENTS; i++) {
      buffer.record({
        user_id: userIds[i % USERS],
        event_type: 'login_failed',
        status: 'failure',
        error_message: 'wrong_password',
        ip_address: `${81 + (i % 100)}.2.69.${i % 250}`,
        user_agent: 'bench-agent/1.0',
        metadata: { platform: 'email' },
      });
      // Let the writer run now and then, as it would between requests.
      if (i % 5000 === 0) await new Promise((r) => setImmediate(r));
    }
    await buffer.close();
    const seconds = (performance.now() - t0) / 1000;
    console.log(
      `buffered writer: ${WRITER_EVENTS} events in ${seconds.toFixed(2)} s = ${Math.round(WRITER_EVENTS / seconds)} events/s (geo-IP included)`,
    );
  } finally {
    await cleanup();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
