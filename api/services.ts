import type { CredentialResolver } from '../shared/auth/credentials';
import type { ServiceContext } from '../shared/context';
import type { RateLimiter } from '../shared/caches/rateLimiter';

/** What route handlers reach through `ctx.services`. */
export interface ApiServices extends ServiceContext {
  credentials: CredentialResolver;
  rateLimiter: RateLimiter;
  startedAt: number;
  version: string;
}
