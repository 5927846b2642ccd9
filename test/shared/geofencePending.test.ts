import test from 'ava';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { gpsSortKey } from '../../shared/caches/gpsLatest';
import { markGeofencePending } from '../../shared/commands/evaluateGeofences';
import { loadConfig } from '../../shared/config';
import { redisKey, RedisKeys } from '../../shared/redis';

/**
 * markGeofencePending writes a relay pass's points into each track's pending set with one script
 * call: every point of every track, a track of more points than one ZADD takes (1,000) included,
 * each set with its week's lifetime, and a replayed pass adds nothing.
 */
test('one call marks every point of every track pending, in sort-key order, with the week lifetime', async (t) => {
  const redis = new Redis(loadConfig(process.env).redisUrl);
  const config = { redisPrefix: `pending-${randomUUID()}:` };
  t.teardown(async () => {
    const keys = await redis.keys(`${config.redisPrefix}*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  });
  const at = Date.UTC(2026, 0, 1);
  const point = (device: string | null, i: number) => ({
    id: randomUUID(),
    device_id: device,
    timestamp: new Date(at + i * 1000),
    created_at: new Date(at + 5000),
  });
  const big = `big-${randomUUID()}`;
  const small = `small-${randomUUID()}`;
  const points = [
    ...Array.from({ length: 2500 }, (_, i) => point(big, 2500 - i)),
    point(small, 1),
    point(null, 2),
    point(small, 3),
    point(null, 4),
  ];
  await redis.ping();
  const sent: string[] = [];
  const commands = (cmd: { name: string }) => sent.push(cmd.name);
  const monitorLike = redis.sendCommand.bind(redis);
  redis.sendCommand = ((cmd: { name: string }, stream?: unknown) => {
    commands(cmd);
    return monitorLike(cmd as never, stream as never);
  }) as typeof redis.sendCommand;
  await markGeofencePending(redis, config, points);
  t.deepEqual(
    sent.filter((c) => c !== 'script' && c !== 'evalsha' && c !== 'eval'),
    [],
    'one script call, no command per track',
  );
  for (const [track, mine] of [
    [big, points.filter((p) => p.device_id === big)],
    [small, points.filter((p) => p.device_id === small)],
    ['-', points.filter((p) => p.device_id === null)],
  ] as const) {
    const key = redisKey(config, RedisKeys.geofencePending(track));
    t.deepEqual(await redis.zrange(key, 0, -1), mine.map(gpsSortKey).sort(), track);
    const ttl = await redis.ttl(key);
    t.true(ttl > 7 * 24 * 3600 - 60 && ttl <= 7 * 24 * 3600, `${track}: ttl ${ttl}`);
  }
  // A relay pass replayed (at least once) adds the same members: nothing new.
  await markGeofencePending(redis, config, points);
  t.is(await redis.zcard(redisKey(config, RedisKeys.geofencePending(big))), 2500);
});
