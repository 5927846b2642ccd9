import type { Attribution } from '../../shared/audit';
import { actorIdOf, Principal } from '../../shared/policies';
import type { ApiServices } from '../services';
import type { GqlLoaders } from './loaders';

/** Per-request GraphQL context: the same principal and services REST handlers get. */
export interface GqlContext {
  [key: PropertyKey]: unknown;
  principal: Principal;
  services: ApiServices;
  ip: string;
  userAgent: string | null;
  /** A request header (lower-case name), e.g. X-ID-App-Key or X-ID-App-Assertion. */
  header(name: string): string | null;
  /** Batched reads of nested fields, made per request (api/graphql/loaders.ts). */
  loaders: GqlLoaders;
}

/** Who asked and from where, for the commands' audit rows (the twin of requestAttribution in api/routing.ts). */
export function gqlAttribution(ctx: GqlContext): Attribution {
  return { actorId: actorIdOf(ctx.principal), ipAddress: ctx.ip, userAgent: ctx.userAgent };
}
