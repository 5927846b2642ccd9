import type Redis from 'ioredis';
import type { Middleware } from 'koa';
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

// INCR each counter and start its expiry on first use: one round trip for all counters.
const SCRIPT = `
local out = {}
for i, k in ipairs(KEYS) do
  local c = redis.call('INCR', k)
  if c == 1 then redis.call('PEXPIRE', k, ARGV[i]) end
  out[i] = c
end
return out`;

interface Counter {
  key: string;
  tier: RateTier;
  resetMs: number;
}

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  resetSeconds: number;
  retryAfterSeconds: number;
}

/**
 * Fixed-window counters in Redis, keyed by identity. Fail-open: when Redis cannot answer, requests
 * pass without headers. The client has no offline queue, so a dead Redis costs no waiting.
 */
export class RateLimiter {
  constructor(
    private readonly redis: Redis,
    private readonly config: Pick<Config, 'redisPrefix' | 'rateLimit'>,
    private readonly logger: Logger,
  ) {
    redis.defineCommand('rlHit', { lua: SCRIPT });
  }

  private counter(name: string, identity: string, tier: RateTier, now: number): Counter {
    const windowMs = tier.windowSeconds * 1000;
    const index = Math.floor(now / windowMs);
    return { key: redisKey(this.config, 'rl', name, identity, index), tier, resetMs: (index + 1) * windowMs };
  }

  /** Counts one request for each counter; returns the most restrictive decision, or null on outage. */
  async hit(counters: Array<{ name: string; identity: string; tier: RateTier }>): Promise<RateDecision | null> {
    const now = Date.now();
    const cs = counters.map((c) => this.counter(c.name, c.identity, c.tier, now));
    let counts: number[];
    try {
      counts = await (this.redis as unknown as { rlHit(n: number, ...a: Array<string | number>): Promise<number[]> }).rlHit(
        cs.length,
        ...cs.map((c) => c.key),
        ...cs.map((c) => c.tier.windowSeconds * 1000 + 1000),
      );
    } catch (err) {
      this.logger.debug({ err: (err as Error).message }, 'rate limit store unreachable; allowing request');
      return null;
    }
    let worst: RateDecision | null = null;
    cs.forEach((c, i) => {
      const remaining = c.tier.limit - counts[i];
      const d: RateDecision = {
        allowed: remaining >= 0,
        limit: c.tier.limit,
        remaining: Math.max(0, remaining),
        resetSeconds: Math.ceil(c.resetMs / 1000),
        retryAfterSeconds: Math.max(1, Math.ceil((c.resetMs - now) / 1000)),
      };
      if (!worst || (!d.allowed && worst.allowed) || (d.allowed === worst.allowed && d.remaining < worst.remaining)) worst = d;
    });
    return worst;
  }
}

/**
 * Applies spec §8: system key unlimited, API keys, users and anonymous callers (by IP) in their
 * tiers, POST /v1/gps additionally limited, X-Internal-Token lifting only the anonymous tier.
 */
export function rateLimit(config: Pick<Config, 'rateLimit' | 'internalToken'>): Middleware {
  return async (ctx, next) => {
    const c = ctx as unknown as AppContext;
    const p = c.state.principal;
    if (p.kind === 'system' || isRateLimitExempt(ctx.path)) return next();

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
      if (ctx.method === r.method && ctx.path === r.path) counters.push({ name: r.tier, identity, tier: config.rateLimit[r.tier] });
    }
    if (counters.length === 0) return next();

    const decision = await c.services.rateLimiter.hit(counters);
    if (decision) {
      ctx.set('X-RateLimit-Limit', String(decision.limit));
      ctx.set('X-RateLimit-Remaining', String(decision.remaining));
      ctx.set('X-RateLimit-Reset', String(decision.resetSeconds));
      if (!decision.allowed) {
        ctx.set('Retry-After', String(decision.retryAfterSeconds));
        throw new HttpError(429, 'TooManyRequests', `rate limit exceeded: ${decision.limit} requests per window; retry in ${decision.retryAfterSeconds} s`);
      }
    }
    await next();
  };
}
