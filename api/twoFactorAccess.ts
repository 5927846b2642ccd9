import { PermissionSet, Principal, actingUserId, authorize, subjects, twoFactorTargetId } from '../shared/policies';
import type { ApiServices } from './services';

/**
 * Whose two-factor authentication a REST or GraphQL call may act on: `user_id` (or the caller's own
 * user), checked by shared/policies (self with two_factor:read/write; another user with
 * two_factor:manage and the hierarchy, or a super admin; the system key must name the user).
 * Returns the user id. The target's permissions come from the cached access sets.
 */
export async function authorizeTwoFactor(
  services: ApiServices,
  p: Principal,
  action: 'read' | 'write',
  userId: string | null | undefined,
): Promise<string> {
  const target = twoFactorTargetId(p, userId);
  const permissions =
    actingUserId(p) === target ? new PermissionSet([]) : (await services.credentials.access.user(target)).permissionSet;
  authorize(p, action, subjects.twoFactor(target, permissions));
  return target;
}
