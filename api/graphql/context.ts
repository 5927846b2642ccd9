import type { Attribution } from '../../shared/audit';
import { badRequest } from '../../shared/errors';
import { actorIdOf, Principal } from '../../shared/policies';
import { isUuid } from '../../shared/zod';
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

/**
 * A resource id argument, checked as REST checks its path's `:id` (zUuid): a malformed one is a
 * 400 naming the argument, not a database error reported as 'invalid value'.
 */
export function idArg(id: string, name = 'id'): string {
  if (!isUuid(id)) throw badRequest(`${name}: must be a UUID`);
  return id;
}
