import type { Knex } from 'knex';
import type { AuthInvalidation, EventBus } from '../events';
import type { Logger } from '../logger';

/** What a user holds through their roles, as pushed to clients (spec §6). */
export interface UserAccessSnapshot {
  permissions: string[];
  roleIds: string[];
  roles: string[];
}

/**
 * Effective permissions and roles of many users in one query (role-wide changes touch every
 * holder of the role). Users without any role are present with empty sets.
 */
export async function snapshotUserAccess(db: Knex | Knex.Transaction, userIds: string[]): Promise<Map<string, UserAccessSnapshot>> {
  const out = new Map<string, UserAccessSnapshot>();
  if (!userIds.length) return out;
  const rows: Array<{ user_id: string; role_id: string; role_name: string; perm: string | null }> = await db('user_roles as ur')
    .join('roles as r', 'r.id', 'ur.role_id')
    .leftJoin('role_permissions as rp', 'rp.role_id', 'ur.role_id')
    .leftJoin('permissions as p', 'p.id', 'rp.permission_id')
    .whereIn('ur.user_id', userIds)
    .select('ur.user_id', 'ur.role_id', 'r.name as role_name', db.raw("p.resource || ':' || p.action as perm"));
  const acc = new Map<string, { perms: Set<string>; roles: Map<string, string> }>();
  for (const id of userIds) acc.set(id, { perms: new Set(), roles: new Map() });
  for (const r of rows) {
    const a = acc.get(r.user_id)!;
    a.roles.set(r.role_id, r.role_name);
    if (r.perm) a.perms.add(r.perm);
  }
  for (const [id, a] of acc) {
    const roleIds = [...a.roles.keys()].sort();
    out.set(id, { permissions: [...a.perms].sort(), roleIds, roles: roleIds.map((r) => a.roles.get(r)!) });
  }
  return out;
}

/** Users holding a role (before a change, so a deleted role still knows its holders). */
export async function roleHolders(db: Knex | Knex.Transaction, roleId: string): Promise<string[]> {
  const rows: Array<{ user_id: string }> = await db('user_roles').where('role_id', roleId).select('user_id');
  return rows.map((r) => r.user_id);
}

const same = (a: string[], b: string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * After the commit: tells each affected user what changed. permissionsUpdated goes only where the
 * effective set differs, rolesUpdated only where the role list (ids or names) differs, and
 * `rolePermissionsChanged` (when given) to every holder of the role so clients refresh.
 */
export async function publishAccessChanges(
  bus: EventBus,
  logger: Logger,
  before: Map<string, UserAccessSnapshot>,
  after: Map<string, UserAccessSnapshot>,
  roleChange?: { roleId: string; roleName: string },
): Promise<void> {
  const timestamp = new Date().toISOString();
  const pushes: Array<Promise<void>> = [];
  for (const [userId, b] of before) {
    const a = after.get(userId) ?? { permissions: [], roleIds: [], roles: [] };
    if (roleChange) pushes.push(bus.publishToUser(userId, { type: 'rolePermissionsChanged', roleId: roleChange.roleId, roleName: roleChange.roleName, timestamp }));
    if (!same(a.permissions, b.permissions)) pushes.push(bus.publishToUser(userId, { type: 'permissionsUpdated', userId, permissions: a.permissions, timestamp }));
    if (!same(a.roleIds, b.roleIds) || !same(a.roles, b.roles)) pushes.push(bus.publishToUser(userId, { type: 'rolesUpdated', userId, roles: a.roles, roleIds: a.roleIds, timestamp }));
  }
  // The change is committed; a push that cannot go out is logged, not turned into a failed request.
  const results = await Promise.allSettled(pushes);
  const failed = results.filter((r) => r.status === 'rejected').length;
  if (failed) logger.warn({ failed }, 'could not publish access change pushes');
}

/**
 * Drops cached credentials after a committed change: at once on this instance (so the caller's
 * very next request sees it) and on every other api/realtime instance through Redis pub/sub.
 */
export async function invalidateCredentials(
  services: { bus: EventBus; logger: Logger; credentials?: { invalidate(msg: AuthInvalidation): void } },
  msg: AuthInvalidation,
): Promise<void> {
  services.credentials?.invalidate(msg);
  try {
    await services.bus.invalidateAuth(msg);
  } catch (err) {
    services.logger.warn({ err: (err as Error).message }, 'could not publish credential invalidation');
  }
}
