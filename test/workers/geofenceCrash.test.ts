import test from 'ava';
import Redis from 'ioredis';
import { SUBSCRIBER } from '../helpers/pushes';
import type { Knex } from 'knex';
import { randomUUID } from 'node:crypto';
import { evaluateGeofences } from '../../shared/commands/evaluateGeofences';
import { createDb } from '../../shared/db';
import { EventBus } from '../../shared/events';
import { createLogger } from '../../shared/logger';
import { redisKey } from '../../shared/redis';
import { createUser } from '../helpers/factories';
import { useStack, type Stack } from '../helpers/stack';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy';
import { gpsBody, make, nowSeconds } from '../helpers/tracking';
import { eventually, lockWaiters } from '../helpers/wait';

// No workers: each test runs the evaluation itself, as a worker's job would, and "crashes" one run.
const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000', RATE_LIMIT_GPS_POST: '100000' } });

interface Push {
  geofence_id: string;
  event: string;
  device_id: string;
}

/** A device's pending transitions (RedisKeys.geofenceTransitions: the name is a wire format, spelled out). */
const pendingTransitions = (s: Stack, device: string) => redisKey(s.config, `geofence:transitions:${device}`);

async function listen(s: Stack) {
  const sub = new Redis(s.config.redisUrl, SUBSCRIBER);
  const received: Push[] = [];
  sub.on('message', (_c, raw) => received.push(JSON.parse(raw).data));
  await sub.subscribe(`${s.config.redisPrefix}ws:geofence`);
  return { received, close: () => sub.disconnect() };
}

/**
 * What evaluation needs (database, Redis, publisher), every connection through a proxy: taking both
 * down at once cuts the run off wherever it is, with nothing it could still save (as a kill -9 of
 * the worker does: no catch runs that can reach anything).
 */
async function doomedDeps(s: Stack) {
  const pgUrl = new URL(s.config.databaseUrl);
  const redisUrl = new URL(s.config.redisUrl);
  const pg: TcpProxy = await startTcpProxy(pgUrl.hostname, Number(pgUrl.port || 5432));
  const rd: TcpProxy = await startTcpProxy(redisUrl.hostname, Number(redisUrl.port || 6379));
  pgUrl.hostname = redisUrl.hostname = '127.0.0.1';
  pgUrl.port = String(pg.port);
  redisUrl.port = String(rd.port);
  const db: Knex = createDb({ ...s.config, databaseUrl: pgUrl.toString() }, { bindModels: false });
  const redis = new Redis(redisUrl.toString(), {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on('error', () => undefined);
  await new Promise((r) => redis.once('ready', r));
  const deps = {
    db,
    redis,
    bus: new EventBus(redis, s.config),
    config: s.config,
    logger: createLogger('doomed', 'silent'),
  };
  return {
    deps,
    async crash() {
      await rd.down();
      await pg.down();
    },
    async close() {
      redis.disconnect();
      await db.destroy().catch(() => undefined);
      await pg.close();
      await rd.close();
    },
  };
}

/**
 * A device inside a fence it had not entered (its point posted, so the relay queued it for
 * evaluation), then an evaluation cut off after Redis confirmed the enter but while its INSERT
 * waits on a lock: `commitOrphan` says whether the cut-off INSERT still commits once the lock goes
 * (PostgreSQL runs it, as it never noticed the client die) or dies with its connection.
 */
let places = 0;
async function crashAfterStateChange(s: Stack, commitOrphan: boolean) {
  // A place of its own: no other test's fence near it.
  const latitude = -50 + 10 * places++;
  const developer = await createUser(s.db, { roles: ['role_developer'] });
  const g = await make(s, developer.token, '/v1/geofences', {
    name: `crash ${randomUUID().slice(0, 6)}`,
    latitude,
    longitude: 13.405,
    radius_km: 5,
  });
  const device = `crash-${randomUUID().slice(0, 8)}`;
  const point = await make(
    s,
    developer.token,
    '/v1/gps',
    gpsBody({ device_id: device, latitude: latitude + 0.001, longitude: 13.405, timestamp: nowSeconds() }),
  );
  await s.api.services.outbox.drain();
  const doomed = await doomedDeps(s);
  const locker = await s.db.transaction();
  try {
    await locker.raw('LOCK TABLE geofence_events IN EXCLUSIVE MODE');
    const run = evaluateGeofences(doomed.deps, [point.id]).then(
      () => 'finished',
      () => 'failed',
    );
    // The INSERT waits: the state in Redis has moved on already.
    await lockWaiters(s.db, 1);
    await doomed.crash();
    t_is(await run, 'failed');
    if (!commitOrphan)
      await s.db.raw(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO geofence_events%'`,
      );
    await locker.commit();
  } catch (err) {
    await locker.rollback().catch(() => undefined);
    throw err;
  } finally {
    await doomed.close();
  }
  const rows = () => s.db('geofence_events').where({ geofence_id: g.id });
  if (commitOrphan) await eventually(async () => (await rows()).length === 1, 10_000, 50);
  else
    await eventually(
      async () =>
        (
          await s.db.raw(
            `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`,
          )
        ).rows.length === 0,
    );
  return { g, point, device, rows };
}

// ava's t is not at hand in the helper: a failed expectation there is an exception.
function t_is(actual: unknown, expected: unknown) {
  if (actual !== expected) throw new Error(`expected ${String(expected)}, got ${String(actual)}`);
}

for (const commitOrphan of [false, true])
  test.serial(
    `a run cut off between the state change and its event: the next run records and pushes it, once (${commitOrphan ? 'the cut-off INSERT committed' : 'nothing written'})`,
    async (t) => {
      const s = stack();
      const l = await listen(s);
      try {
        const { g, point, device, rows } = await crashAfterStateChange(s, commitOrphan);
        t.is((await rows()).length, commitOrphan ? 1 : 0);
        t.is(l.received.filter((p) => p.geofence_id === g.id).length, 0, 'nothing was pushed by the cut-off run');
        // The job's run again (BullMQ retries a job whose worker died as stalled), twice at once.
        const ctx = s.api.services;
        await Promise.all([evaluateGeofences(ctx, [point.id]), evaluateGeofences(ctx, [point.id])]);
        await evaluateGeofences(ctx, [point.id]);
        t.deepEqual(
          (await rows()).map((r) => [r.event, r.gps_point_id, r.device_id]),
          [['enter', point.id, device]],
        );
        t.is(await s.redis.zcard(pendingTransitions(s, device)), 0, 'none left pending');
        await eventually(() => l.received.some((p) => p.geofence_id === g.id), 5000);
        await new Promise((r) => setTimeout(r, 200));
        t.deepEqual(
          l.received.filter((p) => p.geofence_id === g.id).map((p) => [p.event, p.device_id]),
          [['enter', device]],
        );
      } finally {
        l.close();
      }
    },
  );

test.serial('a transition left pending whose fence was deleted meanwhile is dropped', async (t) => {
  const s = stack();
  const l = await listen(s);
  try {
    const { g, point, device, rows } = await crashAfterStateChange(s, false);
    const pendingKey = pendingTransitions(s, device);
    t.is(await s.redis.zcard(pendingKey), 1);
    await s.db('geofences').where({ id: g.id }).delete();
    await evaluateGeofences(s.api.services, [point.id]);
    t.is((await rows()).length, 0);
    t.is(await s.redis.zcard(pendingKey), 0);
    await new Promise((r) => setTimeout(r, 200));
    t.is(l.received.filter((p) => p.geofence_id === g.id).length, 0);
  } finally {
    l.close();
  }
});
