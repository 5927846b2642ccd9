import test from 'ava';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../../shared/config';
import { EventBus } from '../../shared/events';
import { startTcpProxy } from '../helpers/tcpProxy';

const target = new URL(loadConfig(process.env).redisUrl);

/**
 * EventBus.invalidateAuth registers its acknowledgement wait before it publishes: a publish that
 * fails (Redis down) must take the wait back, or each narrowing change during an outage stays in
 * the api's memory for good (outside soak audit: 104 in a minute, none ever freed).
 */
test('a failed publish leaves no acknowledgement wait behind', async (t) => {
  const proxy = await startTcpProxy(target.hostname, Number(target.port || 6379));
  const redis = new Redis(proxy.port, '127.0.0.1', { enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  redis.on('error', () => undefined);
  const bus = new EventBus(redis, { redisPrefix: `acks-${randomUUID()}:` });
  t.teardown(async () => {
    bus.close();
    redis.disconnect();
    await proxy.close();
  });
  await new Promise((r) => redis.once('ready', r));
  // Up: the wait is armed and finished (no receiver here: nothing to wait for).
  t.true(await bus.invalidateAuth({ userIds: [randomUUID()] }, 200));
  t.is(bus.ackWaits, 0);
  await proxy.down();
  await new Promise((r) => setTimeout(r, 50));
  for (let i = 0; i < 20; i++) await t.throwsAsync(() => bus.invalidateAuth({ userIds: [randomUUID()] }, 200));
  t.is(bus.ackWaits, 0);
});
