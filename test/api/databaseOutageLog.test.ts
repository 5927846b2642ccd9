import { randomUUID } from 'node:crypto';
import test from 'ava';
import { Model } from 'objection';
import WebSocket from 'ws';
import { startApi } from '../../api/server';
import type { Config } from '../../shared/config';
import { startRealtime } from '../../realtime/server';
import { startWorkers } from '../../workers/index';
import { createUser } from '../helpers/factories';
import { captureLog, LogLine } from '../helpers/logCapture';
import { useStack } from '../helpers/stack';
import { startTcpProxy, TcpProxy } from '../helpers/tcpProxy';
import { eventually } from '../helpers/wait';
import { refusedUpgrade } from '../helpers/wsClient';

/**
 * A PostgreSQL outage is logged as Redis outages are (shared/outageLog.ts): each distinct failure
 * once, the rest counted (`repeated`), and one "database reachable again" line with the outage's
 * length. Under load, an 8 s outage used to write one line per failed request and per failed
 * connection attempt: 18,000 lines. The database is reached through a proxy the tests take down
 * (connections cut, new ones refused) and bring back.
 */

// Serial: startApi and startRealtime bind Objection's models to their (proxied) pools.
const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000' } });

/** The stack's config with its database behind a proxy the test can take down. */
async function proxied(config: Config): Promise<{ config: Config; proxy: TcpProxy }> {
  const url = new URL(config.databaseUrl);
  const proxy = await startTcpProxy(url.hostname, Number(url.port || 5432));
  url.hostname = '127.0.0.1';
  url.port = String(proxy.port);
  return { config: { ...config, databaseUrl: url.toString() }, proxy };
}

/** Warnings and errors logged from line `from` on. */
const problems = (lines: LogLine[], from: number) => lines.slice(from).filter((l) => l.level >= 40);

/** No failure logged twice: every repeat within the interval is folded. */
function eachOnce(lines: LogLine[]): boolean {
  const keys = lines.map((l) => `${l.msg}|${l.err ?? l.detail ?? ''}|${l.queue ?? ''}`);
  return new Set(keys).size === keys.length;
}

test.serial('api: 200 requests during a database outage log a few lines, then one recovery line', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const { config, proxy } = await proxied(s.config);
  const lines: LogLine[] = [];
  const api = await startApi(config, { port: 0, drainIdleGraceMs: 0, logger: captureLog(lines, 'api') });
  Model.knex(s.db);
  const get = async (path: string) => {
    const r = await fetch(`http://127.0.0.1:${api.port}${path}`, {
      headers: { authorization: `Bearer ${admin.token}` },
    });
    await r.arrayBuffer();
    return { status: r.status, retryAfter: r.headers.get('retry-after') };
  };
  try {
    // Warm: the credential is cached and the pool holds connections through the proxy.
    t.is((await get('/v1/devices')).status, 200);
    const from = lines.length;
    await proxy.down();
    const downAt = Date.now();
    const statuses: number[] = [];
    for (let batch = 0; batch < 10; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => get(i % 2 ? `/v1/devices?page=${i + 1}` : `/v1/trips?page=${i + 1}`)),
      );
      for (const a of answers) {
        statuses.push(a.status);
        t.is(a.retryAfter, '5');
      }
    }
    t.deepEqual([...new Set(statuses)], [503]);
    const during = problems(lines, from);
    t.log(during);
    // A handful of lines (one per distinct failure: the refused connect, the dropped pool
    // connections, the relays' single retry notes), not one per request and connection attempt.
    t.true(during.length <= 8, `${during.length} lines: ${JSON.stringify(during.slice(0, 10))}`);
    t.true(eachOnce(during), JSON.stringify(during));
    const requestLines = during.filter((l) => l.msg === 'dependency unavailable');
    t.true(requestLines.length >= 1, 'the outage is logged at once');
    // What failed, without the statement and its values.
    for (const l of requestLines) t.notRegex(l.err as string, /select|from "|insert/i);
    t.falsy(
      lines.slice(from).find((l) => l.msg === 'database reachable again'),
      'no recovery while down',
    );

    await proxy.up();
    const upAt = Date.now();
    await eventually(async () => (await get('/v1/devices')).status === 200, 10_000, 50);
    const back = await eventually(() => lines.slice(from).find((l) => l.msg === 'database reachable again'), 5000);
    t.is(back.level, 30);
    t.log(back);
    // Every request and connection failure is accounted for: logged, or counted in `repeated`.
    t.true(back.repeated + requestLines.length >= 200, JSON.stringify(back));
    t.true(back.outageMs >= upAt - downAt - 200 && back.outageMs < Date.now() - downAt, JSON.stringify(back));
    t.is(lines.slice(from).filter((l) => l.msg === 'database reachable again').length, 1);
  } finally {
    await api.close();
    Model.knex(s.db);
    await proxy.close();
  }
});

test.serial('realtime: upgrades refused during a database outage log once, then its end', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const { config, proxy } = await proxied(s.config);
  const lines: LogLine[] = [];
  const realtime = await startRealtime(config, { port: 0, logger: captureLog(lines, 'realtime') });
  Model.knex(s.db);
  const base = `ws://127.0.0.1:${realtime.port}`;
  try {
    await proxy.down();
    // A credential not cached yet: each upgrade reads the database.
    for (let i = 0; i < 30; i++) t.is((await refusedUpgrade(base, { token: user.token })).status, 503);
    const during = problems(lines, 0);
    t.log(during);
    t.true(during.length <= 4, `${during.length} lines: ${JSON.stringify(during)}`);
    t.true(eachOnce(during), JSON.stringify(during));
    t.truthy(during.find((l) => l.msg === 'dependency unavailable' && l.path === '/v1/ws'));
    t.falsy(during.find((l) => l.msg === 'upgrade failed'));
    await proxy.up();
    const ws = new WebSocket(`${base}/v1/ws`, { headers: { authorization: `Bearer ${user.token}` } });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    ws.close();
    const back = await eventually(() => lines.find((l) => l.msg === 'database reachable again'), 5000);
    t.true(back.repeated >= 29, JSON.stringify(back));
  } finally {
    await realtime.close();
    Model.knex(s.db);
    await proxy.close();
  }
});

test.serial('workers: jobs failing during a database outage log once per queue, then its end', async (t) => {
  const s = stack();
  const { config, proxy } = await proxied(s.config);
  const lines: LogLine[] = [];
  const workers = await startWorkers(config, { schedule: false, logger: captureLog(lines, 'workers') });
  Model.knex(s.db);
  const queue = s.api.services.queues.queue('scheduled');
  try {
    await proxy.down();
    const failedBefore = await queue.getFailedCount();
    for (let i = 0; i < 30; i++)
      await s.api.services.queues.enqueue('scheduled', { task: 'cleanupSessions' }, { attempts: 1 });
    await eventually(async () => (await queue.getFailedCount()) - failedBefore >= 30, 15_000, 100);
    const during = problems(lines, 0);
    t.log(during);
    t.true(during.length <= 6, `${during.length} lines: ${JSON.stringify(during)}`);
    t.true(eachOnce(during), JSON.stringify(during));
    t.is(during.filter((l) => l.msg === 'job failed').length, 1, JSON.stringify(during));
    await proxy.up();
    await s.api.services.queues.enqueue('scheduled', { task: 'cleanupSessions' }, { attempts: 1 });
    const back = await eventually(() => lines.find((l) => l.msg === 'database reachable again'), 10_000);
    t.true(back.repeated >= 29, JSON.stringify(back));
  } finally {
    await workers.close();
    Model.knex(s.db);
    await proxy.close();
  }
});

test.serial('workers: jobs waiting out a database outage log one line per queue, not one per job', async (t) => {
  // Geofence jobs are not failed by an outage: each goes back to the delayed set and waits
  // (workers/outageRetry.ts). Every job running meanwhile waits: folded as the failures are.
  const s = stack();
  const { config, proxy } = await proxied(s.config);
  const lines: LogLine[] = [];
  const workers = await startWorkers(config, { schedule: false, logger: captureLog(lines, 'workers') });
  Model.knex(s.db);
  const queue = s.api.services.queues.queue('geofence');
  try {
    await proxy.down();
    const delayedBefore = await queue.getDelayedCount();
    for (let i = 0; i < 20; i++) await s.api.services.queues.enqueue('geofence', { gpsPointIds: [randomUUID()] });
    await eventually(async () => (await queue.getDelayedCount()) - delayedBefore >= 20, 15_000, 100);
    const waits = problems(lines, 0).filter((l) => l.msg === 'job waits for a dependency to come back');
    t.is(waits.length, 1, JSON.stringify(waits));
  } finally {
    await proxy.up();
    await workers.close();
    Model.knex(s.db);
    await proxy.close();
    await queue.obliterate({ force: true }).catch(() => undefined);
  }
});
