import type { Context, Middleware, Next } from 'koa';
import type { Config, RateTier } from '../../shared/config';
import { counterAddress } from '../../shared/addressBlock';
import { carriesInternalToken } from '../params';
import { HttpError } from '../../shared/errors';
import { isRoutePath, isUnderRoutePath } from '../../shared/routePaths';
import type { RateDecision, RateLimiter } from '../../shared/caches/rateLimiter';
import type { Principal } from '../../shared/policies';

const EXEMPT_PATHS = ['/health', '/v1/health', '/v1/ws', '/v1/openapi.json', '/v1/schema'];

/** Paths never counted and never given rate-limit headers (spec §8); the OpenAPI document's 429s follow it. */
export function isRateLimitExempt(path: string): boolean {
  return EXEMPT_PATHS.some((exempt) => isRoutePath(path, exempt)) || isUnderRoutePath(path, '/v1/swagger-ui');
}

/** Route-specific limits counted on top of the caller's tier. */
const ROUTE_TIERS: Array<{ method: string; path: string; tier: 'gpsPost' }> = [
  { method: 'POST', path: '/v1/gps', tier: 'gpsPost' },
  // One counter for both ways in: a batch (up to 1,000 points) is one request of the GPS limit, so
  // the limit bounds the points a key stores, not only how it sends them.
  { method: 'POST', path: '/v1/gps/batch', tier: 'gpsPost' },
];

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
      throw new HttpError(
        429,
        'TooManyRequests',
        `rate limit exceeded: ${decision.limit} requests per window; retry in ${decision.retryAfterSeconds} s`,
      );
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
    const p = (ctx.state as { principal: Principal }).principal;
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
      identity = `ip:${counterAddress(ctx.ip)}`; // an IPv6 client by its /64
      const bypass = carriesInternalToken(ctx, config.internalToken);
      if (!bypass) counters.push({ name: 'anonymous', identity, tier: config.rateLimit.anonymous });
    }
    for (const r of ROUTE_TIERS) {
      if (ctx.method === r.method && isRoutePath(path, r.path))
        counters.push({ name: r.tier, identity, tier: config.rateLimit[r.tier] });
    }
    if (counters.length === 0) return next();

    const hit = (ctx as unknown as { services: { rateLimiter: RateLimiter } }).services.rateLimiter.hit(counters);
    return hit instanceof Promise ? hit.then((d) => answer(ctx, d, next)) : answer(ctx, hit, next);
  };
}
