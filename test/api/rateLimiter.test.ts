import test from 'ava';
import { randomBytes } from 'node:crypto';
import { RateLimiter, type RateDecision } from '../../shared/caches/rateLimiter';
import { loadConfig } from '../../shared/config';
import { createLogger } from '../../shared/logger';
import { createRedis, redisKey } from '../../shared/redis';
import { runRedisPrefix } from '../helpers/stack';

// The limiter's notion of time (freshness of the global count, growth rate) runs on a clock the
// tests move by hand, so what is decided locally and what in Redis does not depend on the machine.
const WINDOW_MS = 60_000;
let clock = 1000 * WINDOW_MS + 1000;
Date.now = () => clock;

const config = loadConfig({
  REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379',
  REDIS_PREFIX: `${runRedisPrefix()}${randomBytes(5).toString('hex')}:`,
  API_INSTANCES: '2',
});
const redis = createRedis(config);
const limiter = new RateLimiter(redis, config, createLogger('test', 'silent'));

test.after.always(async () => {
  await limiter.close();
  const keys = await redis.keys(`${config.redisPrefix}*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});

function counter(identity: string, limit: number) {
  return {
    counter: [{ name: 'test', identity, tier: { limit, windowSeconds: WINDOW_MS / 1000 } }],
    key: redisKey(config, 'rl', 'test', identity, 1000),
  };
}

/** Hits until a decision needs Redis (or `max` hits); returns the synchronous decisions and the pending one. */
function hitWhileLocal(c: ReturnType<typeof counter>['counter'], max: number) {
  const local: RateDecision[] = [];
  for (let i = 0; i < max; i++) {
    const d = limiter.hit(c);
    if (d instanceof Promise) return { local, pending: d };
    local.push(d!);
  }
  return { local, pending: undefined };
}

test.serial('far from the limit requests are decided without Redis, and each is counted in Redis once', async (t) => {
  const { counter: c, key } = counter('far', 100_000);
  // No global count heard yet, then no growth measured yet: decided in Redis.
  const first = limiter.hit(c);
  t.true(first instanceof Promise);
  t.is((await first)!.remaining, 99_999);
  clock += 15;
  t.is((await limiter.hit(c))!.remaining, 99_998);
  clock += 1;
  const { local, pending } = hitWhileLocal(c, 200);
  t.is(pending, undefined);
  t.deepEqual(
    local.map((d) => d.remaining),
    Array.from({ length: 200 }, (_, i) => 99_997 - i),
  );
  await limiter.flush();
  t.is(await redis.get(key), '202');
});

test.serial('near the limit every request is counted in Redis, with what was counted locally folded in', async (t) => {
  const limit = 20_000;
  const { counter: c, key } = counter('near', limit);
  await redis.set(key, 19_700);
  await limiter.hit(c);
  clock += 15;
  t.is((await limiter.hit(c))!.remaining, 298);
  clock += 1;
  // Local while the count heard (19 702), what is held here, what two instances may hold unseen
  // (2 × 1% of 20 000 / 2) and the growth until our count lands (1/15 per ms × 21 ms) fit the limit.
  const { local, pending } = hitWhileLocal(c, 1000);
  t.is(local.length, 96);
  t.true(pending instanceof Promise);
  t.is((await pending)!.remaining, limit - 19_799);
  t.is(await redis.get(key), '19799');
  // From here each request gets its own count from Redis: exactly the limit is let through.
  const answers = [];
  for (let i = 0; i < 201; i++) {
    const d = limiter.hit(c);
    t.true(d instanceof Promise, `request ${i}`);
    answers.push(await d);
  }
  t.true(answers.every((d) => d!.allowed));
  t.deepEqual(
    answers.slice(198).map((d) => d!.remaining),
    [2, 1, 0],
  );
  // Redis said the limit is reached and counts only grow: refused without asking Redis again.
  const refused = limiter.hit(c);
  t.false(refused instanceof Promise);
  t.like(refused, { allowed: false, remaining: 0, limit });
  await limiter.flush();
  t.is(await redis.get(key), '20001');
});

test.serial('requests decided in Redis in one turn share one script call, each with its own count', async (t) => {
  const limit = 5;
  // A limit this small leaves no local budget: every request is decided in Redis.
  const counters = Array.from({ length: 3 }, (_, i) => counter(`turn${i}`, limit));
  const calls: number[] = [];
  const script = (redis as unknown as { rlHit: (...a: unknown[]) => Promise<number[]> }).rlHit;
  (redis as unknown as { rlHit: unknown }).rlHit = (n: number, ...rest: unknown[]) => {
    calls.push(n);
    return script.call(redis, n, ...rest);
  };
  try {
    // 8 requests per identity in the same turn: 24 requests, one call.
    const pending = counters.flatMap(({ counter: c }) => Array.from({ length: 8 }, () => limiter.hit(c)));
    t.true(pending.every((d) => d instanceof Promise));
    const decisions = await Promise.all(pending);
    t.deepEqual(calls, [24]);
    for (let i = 0; i < counters.length; i++) {
      const mine = decisions.slice(i * 8, i * 8 + 8);
      // Exactly the limit let through, remaining counting down one by one, then refusals.
      t.deepEqual(
        mine.map((d) => d!.allowed),
        [true, true, true, true, true, false, false, false],
      );
      t.deepEqual(
        mine.map((d) => d!.remaining),
        [4, 3, 2, 1, 0, 0, 0, 0],
      );
      t.is(await redis.get(counters[i].key), '8');
    }
  } finally {
    (redis as unknown as { rlHit: unknown }).rlHit = script;
  }
});

test.serial('a flush sends the windows counted since the last one and visits no other', async (t) => {
  // Many identities with live windows (a fleet of trackers), each heard from Redis once.
  const fleet = Array.from({ length: 500 }, (_, i) => counter(`fleet${i}`, 100_000));
  await Promise.all(fleet.map(({ counter: c }) => limiter.hit(c)));
  clock += 15;
  await Promise.all(fleet.map(({ counter: c }) => limiter.hit(c)));
  clock += 1;
  await limiter.flush();
  // Two identities counted locally since.
  const [a, b] = [fleet[7], fleet[300]];
  t.is(hitWhileLocal(a.counter, 3).pending, undefined);
  t.is(hitWhileLocal(b.counter, 2).pending, undefined);
  // Watch the windows map (a real Map; its iteration is counted) and the script's keys.
  const windows = (limiter as unknown as { windows: Map<string, unknown> }).windows;
  let visited = 0;
  const entries = windows[Symbol.iterator].bind(windows);
  (windows as unknown as { [Symbol.iterator]: () => Iterator<unknown> })[Symbol.iterator] = function* () {
    for (const e of entries()) {
      visited++;
      yield e;
    }
  };
  const sentKeys: string[][] = [];
  const script = (redis as unknown as { rlHit: (...a: unknown[]) => Promise<number[]> }).rlHit;
  (redis as unknown as { rlHit: unknown }).rlHit = (n: number, ...rest: unknown[]) => {
    sentKeys.push(rest.slice(0, n) as string[]);
    return script.call(redis, n, ...rest);
  };
  try {
    await limiter.flush();
  } finally {
    (redis as unknown as { rlHit: unknown }).rlHit = script;
    delete (windows as Partial<Map<string, unknown>>)[Symbol.iterator];
  }
  t.deepEqual(sentKeys, [[a.key, b.key]]);
  t.is(visited, 0, 'the flush walked the windows of idle identities');
  t.is(await redis.get(a.key), '5');
  t.is(await redis.get(b.key), '4');
});
