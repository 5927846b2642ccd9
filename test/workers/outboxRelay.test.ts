import { randomBytes, randomUUID } from 'node:crypto';
import test from 'ava';
import { loadConfig } from '../../shared/config';
import { createContext, ServiceContext } from '../../shared/context';
import { OutboxRelay, SIDE_EFFECT_OUTBOX, writeOutbox } from '../../shared/outbox';
import { redisReady } from '../../shared/redis';
import { createTestDatabase } from '../helpers/db';
import { listenPushes } from '../helpers/pushes';
import { countRows } from '../helpers/tracking';
import { eventually } from '../helpers/wait';
import { runRedisPrefix } from '../helpers/stack';

// No stack: a context whose relay is not started, so each test decides which relays run and when.
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let ctx: ServiceContext;

test.before(async () => {
  database = await createTestDatabase();
  const config = loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: database.url,
    DATABASE_POOL_MAX: '5',
    REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379',
    REDIS_PREFIX: `${runRedisPrefix()}${randomBytes(5).toString('hex')}:`,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL || 'silent',
  });
  ctx = createContext(config, 'test');
  if (!(await redisReady(ctx.redis, 10_000))) throw new Error('redis not reachable');
});

test.after.always(async () => {
  await ctx?.close();
  await database?.drop();
});

/** Stores `n` GPS points, each with its own outbox row as POST /v1/gps writes it; returns their ids in order. */
async function acceptPoints(n: number, device: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    await ctx.db.transaction(async (trx) => {
      const speeds = { speed_kmh: 0, speed_mps: 0, speed_mph: 0, speed_knots: 0 };
      const [row] = await trx('gps_points')
        .insert({
          device_id: device,
          latitude: 50 + i / 1000,
          longitude: 8,
          timestamp: new Date(Date.now() + i * 1000),
          ...speeds,
        })
        .returning('id');
      await writeOutbox(trx, 'gpsPoints', { ids: [row.id] });
      ids.push(row.id);
    });
  }
  return ids;
}

const outboxRows = () => countRows(ctx.db(SIDE_EFFECT_OUTBOX));
const pushedIds = (messages: Array<Record<string, any>>) =>
  messages.filter((m) => m.type === 'gpsUpdate').map((m) => m.data.id as string);

test.serial(
  'a relay that dies between publishing and deleting leaves its rows; the next pass publishes them again, in order (at least once)',
  async (t) => {
    const device = `crash-${randomUUID()}`;
    const ids = await acceptPoints(3, device);
    const pushes = await listenPushes(ctx.redis, ctx.config, `gps:${device}`);
    try {
      const dying = new OutboxRelay({
        ...ctx,
        bus: {
          async publishMany(items) {
            await ctx.bus.publishMany(items);
            throw new Error('relay died before its commit');
          },
          wsReceivers: () => ctx.bus.wsReceivers(),
          announceAuthInvalidation: (msg) => ctx.bus.announceAuthInvalidation(msg),
        },
      });
      await t.throwsAsync(dying.drain(), { message: /relay died/ });
      t.is(await outboxRows(), 3, 'nothing was deleted');

      await ctx.outbox.drain();
      await eventually(async () => pushedIds(pushes.messages).length >= 6);
      t.deepEqual(pushedIds(pushes.messages), [...ids, ...ids], 'published twice, never lost, in order each time');
      t.is(await outboxRows(), 0);
      const jobs = await ctx.queues.queue('geofence').getJobs(['waiting', 'delayed', 'prioritized']);
      t.deepEqual(
        jobs
          .flatMap((j) => (j.data as { gpsPointIds: string[] }).gpsPointIds)
          .filter((id) => ids.includes(id))
          .sort(),
        [...ids].sort(),
      );
    } finally {
      pushes.close();
    }
  },
);

test.serial('relays draining at the same time publish every point once, in the order accepted', async (t) => {
  const device = `race-${randomUUID()}`;
  // More than one pass claims, so the relays take turns.
  const ids = await acceptPoints(450, device);
  const pushes = await listenPushes(ctx.redis, ctx.config, `gps:${device}`);
  try {
    const other = new OutboxRelay(ctx);
    await Promise.all([ctx.outbox.drain(), other.drain(), ctx.outbox.drain(), other.drain()]);
    await eventually(async () => pushedIds(pushes.messages).length >= ids.length);
    t.deepEqual(pushedIds(pushes.messages), ids);
    t.is(await outboxRows(), 0);
  } finally {
    pushes.close();
  }
});

test.serial('an email row becomes one email job, and a replayed row does not add a second', async (t) => {
  const outboxId = randomUUID();
  for (let i = 0; i < 2; i++) {
    await ctx.db.transaction((trx) => writeOutbox(trx, 'email', { outboxId }));
    await ctx.outbox.drain();
  }
  const jobs = (await ctx.queues.queue('email').getJobs(['waiting', 'delayed', 'prioritized'])).filter(
    (j) => j.data.outboxId === outboxId,
  );
  t.is(jobs.length, 1);
  t.is(jobs[0].id, `email-${outboxId}`);
  t.is(await outboxRows(), 0);
});

test.serial('a pass carries out at most 5,000 points: large batches take several passes, none lost', async (t) => {
  const device = `big-${randomUUID()}`;
  // 12 batch rows of 1,000 points each, as POST /v1/gps/batch writes them.
  const { rows } = await ctx.db.raw(
    `INSERT INTO gps_points (device_id, latitude, longitude, timestamp, speed_kmh, speed_mps, speed_mph, speed_knots)
     SELECT ?, 50, 8, timestamp '2026-01-01' + g * interval '1 second', 0, 0, 0, 0 FROM generate_series(1, 12000) g
     RETURNING id`,
    [device],
  );
  const ids = (rows as Array<{ id: string }>).map((r) => r.id);
  for (let i = 0; i < ids.length; i += 1000) await writeOutbox(ctx.db, 'gpsPoints', { ids: ids.slice(i, i + 1000) });
  const pushes = await listenPushes(ctx.redis, ctx.config, `gps:${device}`);
  let claims = 0;
  const onQuery = (q: { sql: string }) => {
    if (q.sql.includes(`DELETE FROM ${SIDE_EFFECT_OUTBOX}`)) claims++;
  };
  ctx.db.on('query', onQuery);
  try {
    await ctx.outbox.drain();
    t.is(claims, 3, 'rows of 5,000, 5,000 and 2,000 points');
    t.is(await outboxRows(), 0);
    await eventually(async () => pushedIds(pushes.messages).length >= ids.length, 20_000);
    t.deepEqual(pushedIds(pushes.messages), ids);
  } finally {
    ctx.db.off('query', onQuery);
    pushes.close();
  }
});
