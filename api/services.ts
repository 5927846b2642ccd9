import type { CredentialResolver } from '../shared/auth/credentials';
import type { ServiceContext } from '../shared/context';
import type { RateLimiter } from './middleware/rateLimit';

/** What route handlers reach through `ctx.services`. */
export interface ApiServices extends ServiceContext {
  credentials: CredentialResolver;
  rateLimiter: RateLimiter;
  startedAt: number;
  version: string;
}
