import type Redis from 'ioredis';
import { apiInstanceCount, type Config, type RateTier } from '../config';
import type { Logger } from '../logger';
import { redisKey, RedisKeys } from '../redis';

// Add each increment to its counter and start the counter's expiry on first use; returns the
// global counts. One round trip for any number of counters; atomic, so a count returned to one
// request is never returned to another.
const SCRIPT = `
local n = #KEYS
local out = {}
for i, k in ipairs(KEYS) do
  local c = redis.call('INCRBY', k, ARGV[n + i])
  if redis.call('PTTL', k) < 0 then redis.call('PEXPIRE', k, ARGV[i]) end
  out[i] = c
end
return out`;

/** How often locally counted requests are added to the shared counters. */
const FLUSH_MS = 10;
/** A window not heard from Redis for longer than this is decided in Redis (sparse traffic). */
const STALE_MS = 50;
/** After an outage, how often the store is tried again. */
const RETRY_MS = 1000;
/** Share of a limit that may be let through beyond it when every instance counts locally at once. */
const MAX_OVERSHOOT = 0.01;

interface Counter {
  key: string;
  tier: RateTier;
  resetMs: number;
  /** Most requests this instance may have counted here that Redis has not answered for (0: none). */
  budget: number;
  /** What all instances together may have counted unseen: `instances × budget`. */
  reserve: number;
}

/** One fixed window of one identity as this instance sees it. */
interface WindowState {
  /** The window's counter key in Redis. */
  key: string;
  /** Global count at the last answer from Redis (all instances, our flushed requests included). */
  synced: number;
  /** Counted here, sent to Redis, not yet answered. */
  inflight: number;
  /** Counted here, not yet sent. */
  pending: number;
  ttlMs: number;
  resetMs: number;
  /** When the global count was last read from Redis (0: never). */
  syncedAt: number;
  /** Growth of the global count per millisecond between two answers (Infinity: not measured yet). */
  rate: number;
  /** Count and time the next growth measurement starts from (time 0: none yet). */
  rateFrom: number;
  rateAt: number;
}

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  resetSeconds: number;
  retryAfterSeconds: number;
}

interface QueuedCount {
  keys: string[];
  ttlsMs: number[];
  increments: number[];
  resolve(counts: number[]): void;
  reject(err: unknown): void;
}

type HitFn = (n: number, ...a: Array<string | number>) => Promise<number[]>;

/**
 * Fixed-window counters in Redis, keyed by identity. Far from the limit a request is counted here
 * and decided synchronously, and the counts are added to Redis in one script call every few
 * milliseconds; near the limit (and whenever this instance has not heard the global count lately)
 * each request is counted in Redis by one atomic INCRBY and allowed only if the count it gets back
 * is within the limit, so the limit holds exactly across instances. See `decidesLocally` for where
 * "near" starts. Fail-open: while Redis cannot answer, requests pass and get no headers.
 */
export class RateLimiter {
  private readonly windows = new Map<string, WindowState>();
  /**
   * Windows counted here since the last flush: the flush sends these and visits nothing else, so
   * its cost follows the requests of the last few milliseconds, not every identity with a live
   * window (a fleet of trackers keeps thousands; visiting them all every FLUSH_MS was a loop of
   * hundreds of thousands of entries a second). Ended windows are forgotten once a second.
   */
  private readonly dirty = new Set<WindowState>();
  /** Current counter per tier name and identity, so the hot path builds no key (pruned by flush). */
  private readonly counters = new Map<string, Map<string, Counter>>();
  /** Api processes sharing the counters (at least two: a PM2 reload briefly runs old and new). */
  private readonly instances: number;
  private pruneAt = 0;
  private flushTimer?: NodeJS.Timeout;
  private downUntil = 0;
  /** Requests waiting for the end of this turn to be counted in Redis together (`countInRedis`). */
  private queued: QueuedCount[] = [];

  constructor(
    private readonly redis: Redis,
    private readonly config: Pick<Config, 'redisPrefix' | 'rateLimit' | 'instances'>,
    private readonly logger: Logger,
  ) {
    redis.defineCommand('rlHit', { lua: SCRIPT });
    this.instances = Math.max(2, apiInstanceCount(config));
  }

  private get script(): HitFn {
    return (this.redis as unknown as { rlHit: HitFn }).rlHit.bind(this.redis);
  }

  /** The counter of a tier and identity in the window containing `now` (reused while it lasts). */
  private counter(name: string, identity: string, tier: RateTier, now: number): Counter {
    let byIdentity = this.counters.get(name);
    if (!byIdentity) this.counters.set(name, (byIdentity = new Map()));
    const last = byIdentity.get(identity);
    if (last && last.tier === tier && now < last.resetMs && now >= last.resetMs - tier.windowSeconds * 1000)
      return last;
    const windowMs = tier.windowSeconds * 1000;
    const index = Math.floor(now / windowMs);
    // Every instance holding its whole budget unseen lets at most instances × budget ≤ 1% of the
    // limit through beyond it, however the requests are timed; small limits get no budget at all.
    const budget = Math.floor((tier.limit * MAX_OVERSHOOT) / this.instances);
    const key = redisKey(this.config, RedisKeys.rateLimit(name, identity, index));
    const c: Counter = { key, tier, resetMs: (index + 1) * windowMs, budget, reserve: budget * this.instances };
    byIdentity.set(identity, c);
    return c;
  }

  private markDown(err: unknown): void {
    this.logger.debug({ err: (err as Error).message }, 'rate limit store unreachable; allowing requests');
    this.downUntil = Date.now() + RETRY_MS;
    // Local counts may have been lost with the store; start over from Redis when it is back.
    this.windows.clear();
    this.dirty.clear();
  }

  private window(c: Counter): WindowState {
    let w = this.windows.get(c.key);
    if (!w) {
      const ttlMs = c.tier.windowSeconds * 1000 + 1000;
      w = {
        key: c.key,
        synced: 0,
        inflight: 0,
        pending: 0,
        ttlMs,
        resetMs: c.resetMs,
        syncedAt: 0,
        rate: Infinity,
        rateFrom: 0,
        rateAt: 0,
      };
      this.windows.set(c.key, w);
    }
    return w;
  }

  /**
   * Whether the next request may be counted here without asking Redis, i.e. whether the window is
   * still more than a margin below its limit. The margin is what the global count may have become
   * since we last heard it, unknown to us: what the instances hold unseen (at most `reserve`) plus
   * its growth until our count reaches Redis (it grew at `rate`; we heard it `age` ms ago; our
   * count is sent within FLUSH_MS and lands within about as long again, Redis' latency included).
   * Within the margin a local decision could let through a request that Redis would refuse, so
   * each request is decided in Redis; so too with no budget left or no recent answer. The budget
   * bounds the error when the growth estimate is wrong (a sudden burst): see `counter`.
   */
  private decidesLocally(c: Counter, w: WindowState | undefined, now: number): boolean {
    if (!w) return false;
    const age = now - w.syncedAt;
    const unseen = w.inflight + w.pending + 1;
    return (
      age <= STALE_MS &&
      unseen <= c.budget &&
      w.synced + unseen + c.reserve + w.rate * (age + 2 * FLUSH_MS) <= c.tier.limit
    );
  }

  /** Takes in a global count answered by Redis, and measures how fast it grows. */
  private heard(w: WindowState, count: number, at: number): void {
    w.synced = Math.max(w.synced, count);
    w.syncedAt = at;
    const since = at - w.rateAt;
    if (since < FLUSH_MS) return;
    // Answers further apart than STALE_MS say nothing about the current pace: measure afresh.
    w.rate = w.rateAt > 0 && since <= STALE_MS ? (w.synced - w.rateFrom) / since : Infinity;
    w.rateFrom = w.synced;
    w.rateAt = at;
  }

  private scheduleFlush(): void {
    if (this.flushTimer) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      void this.flush();
    }, FLUSH_MS);
    this.flushTimer.unref();
  }

  /** Sends every window's pending count to Redis in one call and takes back the global counts. */
  async flush(): Promise<void> {
    const now = Date.now();
    const batch: Array<[string, WindowState, number]> = [];
    for (const w of this.dirty) {
      // A window decided in Redis meanwhile sent its pending count with that request.
      if (w.pending === 0) continue;
      batch.push([w.key, w, w.pending]);
      w.inflight += w.pending;
      w.pending = 0;
    }
    this.dirty.clear();
    if (now >= this.pruneAt) {
      this.pruneAt = now + 1000;
      for (const [key, w] of this.windows) {
        if (w.resetMs < now && w.inflight === 0 && w.pending === 0) this.windows.delete(key);
      }
      for (const byIdentity of this.counters.values()) {
        for (const [identity, c] of byIdentity) if (c.resetMs < now) byIdentity.delete(identity);
      }
    }
    if (!batch.length) return;
    try {
      const counts = await this.script(
        batch.length,
        ...batch.map((b) => b[0]),
        ...batch.map((b) => b[1].ttlMs),
        ...batch.map((b) => b[2]),
      );
      const at = Date.now();
      batch.forEach(([, w, sent], i) => {
        w.inflight -= sent;
        this.heard(w, counts[i], at);
      });
    } catch (err) {
      this.markDown(err);
    }
  }

  /**
   * Counts one request for each counter; returns the most restrictive decision, or null on outage.
   * Far from every limit, and once a limit is known to be reached, the answer is synchronous: no
   * promise, no I/O on the hot path. Otherwise the request is counted and decided in Redis.
   */
  hit(
    counters: Array<{ name: string; identity: string; tier: RateTier }>,
  ): RateDecision | null | Promise<RateDecision | null> {
    const now = Date.now();
    if (now < this.downUntil) return null;
    const cs = counters.map((c) => this.counter(c.name, c.identity, c.tier, now));
    let local = true;
    for (const c of cs) {
      const w = this.windows.get(c.key);
      // Counts only grow within a window: once Redis said the limit is reached, every later request is refused.
      if (w && w.synced >= c.tier.limit) return this.decideLocally(cs, now);
      if (local && !this.decidesLocally(c, w, now)) local = false;
    }
    return local ? this.decideLocally(cs, now) : this.decideInRedis(cs, now);
  }

  /** Counts the request here; decides by the global count last heard plus what is counted here. */
  private decideLocally(cs: Counter[], now: number): RateDecision {
    let worst: RateDecision | null = null;
    for (const c of cs) {
      const w = this.window(c);
      w.pending++;
      this.dirty.add(w);
      worst = mostRestrictive(worst, decision(c, w.synced + w.inflight + w.pending, now));
    }
    this.scheduleFlush();
    return worst!;
  }

  /** Adds this request, and whatever was counted here and not yet sent, to Redis; decides by the counts returned. */
  private async decideInRedis(cs: Counter[], now: number): Promise<RateDecision | null> {
    const ws = cs.map((c) => this.window(c));
    const sent = ws.map((w) => {
      const n = w.pending + 1;
      w.pending = 0;
      w.inflight += n;
      return n;
    });
    let counts: number[];
    try {
      counts = await this.countInRedis(
        cs.map((c) => c.key),
        ws.map((w) => w.ttlMs),
        sent,
      );
    } catch (err) {
      this.markDown(err);
      return null;
    }
    const at = Date.now();
    let worst: RateDecision | null = null;
    cs.forEach((c, i) => {
      ws[i].inflight -= sent[i];
      this.heard(ws[i], counts[i], at);
      worst = mostRestrictive(worst, decision(c, counts[i], now));
    });
    // The flush also forgets windows that have ended.
    this.scheduleFlush();
    return worst!;
  }

  /**
   * Adds `increments` to `keys` in Redis and answers their new counts. The requests decided in
   * Redis during one turn of the event loop share one script call (one round trip and one command
   * for the whole turn, not one per request). The script runs its increments in order, so each
   * request still gets a count of its own, as with one call per request.
   */
  private countInRedis(keys: string[], ttlsMs: number[], increments: number[]): Promise<number[]> {
    return new Promise((resolve, reject) => {
      if (this.queued.push({ keys, ttlsMs, increments, resolve, reject }) === 1)
        setImmediate(() => void this.sendQueued());
    });
  }

  private async sendQueued(): Promise<void> {
    const batch = this.queued;
    this.queued = [];
    const keys = batch.flatMap((q) => q.keys);
    try {
      const counts = await this.script(
        keys.length,
        ...keys,
        ...batch.flatMap((q) => q.ttlsMs),
        ...batch.flatMap((q) => q.increments),
      );
      let at = 0;
      for (const q of batch) {
        q.resolve(counts.slice(at, at + q.keys.length));
        at += q.keys.length;
      }
    } catch (err) {
      for (const q of batch) q.reject(err);
    }
  }

  /** Flushes what is still counted locally (shutdown). */
  async close(): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    await this.flush();
  }
}

/** The decision for a request that is the `count`th of its counter's window. */
function decision(c: Counter, count: number, now: number): RateDecision {
  const remaining = c.tier.limit - count;
  return {
    allowed: remaining >= 0,
    limit: c.tier.limit,
    remaining: Math.max(0, remaining),
    resetSeconds: Math.ceil(c.resetMs / 1000),
    retryAfterSeconds: Math.max(1, Math.ceil((c.resetMs - now) / 1000)),
  };
}

function mostRestrictive(a: RateDecision | null, b: RateDecision): RateDecision {
  return !a || (!b.allowed && a.allowed) || (b.allowed === a.allowed && b.remaining < a.remaining) ? b : a;
}
