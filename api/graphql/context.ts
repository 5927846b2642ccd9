import type { Principal } from '../../shared/policies';
import type { ApiServices } from '../services';

/** Per-request GraphQL context: the same principal and services REST handlers get. */
export interface GqlContext {
  [key: PropertyKey]: unknown;
  principal: Principal;
  services: ApiServices;
  ip: string;
  userAgent: string | null;
}
