import type Redis from 'ioredis';
import type { Context, Middleware, Next } from 'koa';
import type { Config, RateTier } from '../../shared/config';
import { safeEqual } from '../../shared/crypto';
import { HttpError } from '../../shared/errors';
import type { Logger } from '../../shared/logger';
import { redisKey } from '../../shared/redis';
import type { AppContext } from '../routing';

/** Paths never counted and never given rate-limit headers (spec §8). */
export function isRateLimitExempt(path: string): boolean {
  return (
    path === '/health' ||
    path === '/v1/health' ||
    path === '/v1/ws' ||
    path === '/v1/openapi.json' ||
    path === '/v1/schema' ||
    path === '/v1/swagger-ui' ||
    path.startsWith('/v1/swagger-ui/')
  );
}

/** Route-specific limits counted on top of the caller's tier. */
const ROUTE_TIERS: Array<{ method: string; path: string; tier: 'gpsPost' }> = [{ method: 'POST', path: '/v1/gps', tier: 'gpsPost' }];

// Add each increment to its counter and start the counter's expiry on first use; returns the
// global counts. One round trip for any number of counters.
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
/** A window's global count older than this is refreshed before deciding (sparse traffic). */
const STALE_MS = 50;
/** After an outage, how often the store is tried again. */
const RETRY_MS = 1000;

interface Counter {
  key: string;
  tier: RateTier;
  resetMs: number;
}

/** One fixed window of one identity as this instance sees it. */
interface WindowState {
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
  loading?: Promise<void>;
}

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  resetSeconds: number;
  retryAfterSeconds: number;
}

type HitFn = (n: number, ...a: Array<string | number>) => Promise<number[]>;

/**
 * Fixed-window counters in Redis, keyed by identity, counted without a Redis round trip per
 * request: the first request of a window loads the global count, later ones are counted here and
 * added to Redis in one script call every few milliseconds. Decisions are exact for requests this
 * instance sees; other instances' requests are seen at most one flush later.
 * Fail-open: while Redis cannot answer, requests pass and get no headers.
 */
export class RateLimiter {
  private readonly windows = new Map<string, WindowState>();
  /** Current counter per tier name and identity, so the hot path builds no key (pruned by flush). */
  private readonly counters = new Map<string, Map<string, Counter>>();
  private pruneAt = 0;
  private flushTimer?: NodeJS.Timeout;
  private downUntil = 0;

  constructor(
    private readonly redis: Redis,
    private readonly config: Pick<Config, 'redisPrefix' | 'rateLimit'>,
    private readonly logger: Logger,
  ) {
    redis.defineCommand('rlHit', { lua: SCRIPT });
  }

  private get script(): HitFn {
    return (this.redis as unknown as { rlHit: HitFn }).rlHit.bind(this.redis);
  }

  /** The counter of a tier and identity in the window containing `now` (reused while it lasts). */
  private counter(name: string, identity: string, tier: RateTier, now: number): Counter {
    let byIdentity = this.counters.get(name);
    if (!byIdentity) this.counters.set(name, (byIdentity = new Map()));
    const last = byIdentity.get(identity);
    if (last && last.tier === tier && now < last.resetMs && now >= last.resetMs - tier.windowSeconds * 1000) return last;
    const windowMs = tier.windowSeconds * 1000;
    const index = Math.floor(now / windowMs);
    const c: Counter = { key: redisKey(this.config, 'rl', name, identity, index), tier, resetMs: (index + 1) * windowMs };
    byIdentity.set(identity, c);
    return c;
  }

  private markDown(err: unknown): void {
    this.logger.debug({ err: (err as Error).message }, 'rate limit store unreachable; allowing requests');
    this.downUntil = Date.now() + RETRY_MS;
    // Local counts may have been lost with the store; start over from Redis when it is back.
    this.windows.clear();
  }

  /**
   * Returns the window with a fresh global count: read from Redis when never read or stale
   * (concurrent requests share one read); under steady traffic the flushes keep it fresh.
   */
  private async load(c: Counter, now: number): Promise<WindowState> {
    let w = this.windows.get(c.key);
    if (!w) {
      w = { synced: 0, inflight: 0, pending: 0, ttlMs: c.tier.windowSeconds * 1000 + 1000, resetMs: c.resetMs, syncedAt: 0 };
      this.windows.set(c.key, w);
    }
    if (now - w.syncedAt > STALE_MS) {
      const state = w;
      state.loading ??= this.script(1, c.key, state.ttlMs, 0)
        .then(([count]) => {
          state.synced = Math.max(state.synced, count);
          state.syncedAt = Date.now();
        })
        .finally(() => (state.loading = undefined));
      await state.loading;
    }
    return w;
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
    for (const [key, w] of this.windows) {
      if (w.pending > 0) {
        batch.push([key, w, w.pending]);
        w.inflight += w.pending;
        w.pending = 0;
      } else if (w.resetMs < now && w.inflight === 0) this.windows.delete(key);
    }
    if (now >= this.pruneAt) {
      this.pruneAt = now + 1000;
      for (const byIdentity of this.counters.values()) {
        for (const [identity, c] of byIdentity) if (c.resetMs < now) byIdentity.delete(identity);
      }
    }
    if (!batch.length) return;
    try {
      const counts = await this.script(batch.length, ...batch.map((b) => b[0]), ...batch.map((b) => b[1].ttlMs), ...batch.map((b) => b[2]));
      const at = Date.now();
      batch.forEach(([, w, sent], i) => {
        w.inflight -= sent;
        w.synced = Math.max(w.synced, counts[i]);
        w.syncedAt = at;
      });
    } catch (err) {
      this.markDown(err);
    }
  }

  /**
   * Counts one request for each counter; returns the most restrictive decision, or null on outage.
   * When every window is fresh the answer is synchronous: no promise, no I/O on the hot path.
   */
  hit(counters: Array<{ name: string; identity: string; tier: RateTier }>): RateDecision | null | Promise<RateDecision | null> {
    const now = Date.now();
    if (now < this.downUntil) return null;
    const cs = counters.map((c) => this.counter(c.name, c.identity, c.tier, now));
    const fresh: WindowState[] = [];
    for (const c of cs) {
      const w = this.windows.get(c.key);
      if (!w || now - w.syncedAt > STALE_MS) return this.hitAfterLoad(cs, now);
      fresh.push(w);
    }
    return this.decide(cs, fresh, now);
  }

  private async hitAfterLoad(cs: Counter[], now: number): Promise<RateDecision | null> {
    let states: WindowState[];
    try {
      states = await Promise.all(cs.map((c) => this.load(c, now)));
    } catch (err) {
      this.markDown(err);
      return null;
    }
    return this.decide(cs, states, now);
  }

  private decide(cs: Counter[], states: WindowState[], now: number): RateDecision {
    let worst: RateDecision | null = null;
    cs.forEach((c, i) => {
      const w = states[i];
      w.pending++;
      const count = w.synced + w.inflight + w.pending;
      const remaining = c.tier.limit - count;
      const d: RateDecision = {
        allowed: remaining >= 0,
        limit: c.tier.limit,
        remaining: Math.max(0, remaining),
        resetSeconds: Math.ceil(c.resetMs / 1000),
        retryAfterSeconds: Math.max(1, Math.ceil((c.resetMs - now) / 1000)),
      };
      if (!worst || (!d.allowed && worst.allowed) || (d.allowed === worst.allowed && d.remaining < worst.remaining)) worst = d;
    });
    this.scheduleFlush();
    return worst!;
  }

  /** Flushes what is still counted locally (shutdown). */
  async close(): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    await this.flush();
  }
}

/** Sets the rate-limit headers (and refuses the request when over the limit), then continues. */
function answer(ctx: Context, decision: RateDecision | null, next: Next): Promise<unknown> {
  if (decision) {
    // Straight on the Node response: Koa's ctx.set adds nothing for string values.
    const res = ctx.res;
    res.setHeader('X-RateLimit-Limit', String(decision.limit));
    res.setHeader('X-RateLimit-Remaining', String(decision.remaining));
    res.setHeader('X-RateLimit-Reset', String(decision.resetSeconds));
    if (!decision.allowed) {
      res.setHeader('Retry-After', String(decision.retryAfterSeconds));
      throw new HttpError(429, 'TooManyRequests', `rate limit exceeded: ${decision.limit} requests per window; retry in ${decision.retryAfterSeconds} s`);
    }
  }
  return next();
}

/**
 * Applies spec §8: system key unlimited, API keys, users and anonymous callers (by IP) in their
 * tiers, POST /v1/gps additionally limited, X-Internal-Token lifting only the anonymous tier.
 * Not an async function: when the limiter decides synchronously (the usual case) no promise is
 * made here.
 */
export function rateLimit(config: Pick<Config, 'rateLimit' | 'internalToken'>): Middleware {
  return (ctx, next) => {
    const c = ctx as unknown as AppContext;
    const p = c.state.principal;
    if (p.kind === 'system') return next();
    const path = ctx.path;
    if (isRateLimitExempt(path)) return next();

    const counters: Array<{ name: string; identity: string; tier: RateTier }> = [];
    let identity: string;
    if (p.kind === 'apiKey') {
      identity = `key:${p.apiKeyId}`;
      counters.push({ name: 'apiKey', identity, tier: config.rateLimit.apiKey });
    } else if (p.kind === 'user') {
      identity = `user:${p.userId}`;
      counters.push({ name: 'user', identity, tier: config.rateLimit.user });
    } else {
      identity = `ip:${ctx.ip}`;
      const bypass = config.internalToken !== '' && safeEqual(ctx.get('x-internal-token'), config.internalToken);
      if (!bypass) counters.push({ name: 'anonymous', identity, tier: config.rateLimit.anonymous });
    }
    for (const r of ROUTE_TIERS) {
      if (path === r.path && ctx.method === r.method) counters.push({ name: r.tier, identity, tier: config.rateLimit[r.tier] });
    }
    if (counters.length === 0) return next();

    const hit = c.services.rateLimiter.hit(counters);
    return hit instanceof Promise ? hit.then((d) => answer(ctx, d, next)) : answer(ctx, hit, next);
  };
}
