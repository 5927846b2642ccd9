import type { ExecutionContext } from 'ava';
import type { ServiceProcess } from './processes';
import { PrivateRedis, startPrivateRedis } from './redisServer';
import { Stack, startStack } from './stack';

/** What a file that takes Redis away from real processes holds. */
export interface OutageStack {
  redis: PrivateRedis;
  stack: Stack;
  /** Processes the tests spawn: killed after the file's tests, before the stack closes. */
  services: ServiceProcess[];
}

/**
 * A stack on a redis-server of the file's own (which its tests stop, freeze and restart), and the
 * service processes they spawn on it. After the tests, every process is killed and Redis is
 * brought back before the stack closes, whatever state a failed test left it in.
 */
export function useOutageStack(test: {
  before: (fn: (t: ExecutionContext) => Promise<void>) => void;
  after: { always: (fn: () => Promise<void>) => void };
}): () => OutageStack {
  let held: OutageStack | undefined;
  test.before(async () => {
    const redis = await startPrivateRedis();
    held = { redis, stack: await startStack({ env: { REDIS_URL: redis.url } }), services: [] };
  });
  test.after.always(async () => {
    if (!held) return;
    await Promise.all(held.services.map((p) => p.kill()));
    held.redis.thaw();
    await held.redis.start().catch(() => undefined);
    await held.stack.close();
    await held.redis.stop();
  });
  return () => {
    if (!held) throw new Error('outage stack not started');
    return held;
  };
}
