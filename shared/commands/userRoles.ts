import type { Knex } from 'knex';
import type { ServiceContext } from '../context';
import { Role } from '../models/Role';
import { loadUserAccess } from '../queries/access';

/** A user's roles, by name. */
export async function userRoles(db: Knex, userId: string): Promise<Role[]> {
  return Role.query(db).join('user_roles as ur', 'ur.role_id', 'roles.id').where('ur.user_id', userId).orderBy('roles.name').select('roles.*');
}

/**
 * After a user's roles changed (and committed): cached credentials are dropped on every instance,
 * and the user's clients get rolesUpdated and permissionsUpdated with the new effective sets.
 */
export async function announceUserAccessChanged(ctx: ServiceContext, userId: string): Promise<void> {
  await ctx.bus.invalidateAuth({ userId });
  const [access, roles] = await Promise.all([loadUserAccess(ctx.db, userId), userRoles(ctx.db, userId)]);
  const timestamp = new Date().toISOString();
  await ctx.bus.publishToUser(userId, { type: 'rolesUpdated', userId, roles: roles.map((r) => r.name), roleIds: roles.map((r) => r.id), timestamp });
  await ctx.bus.publishToUser(userId, { type: 'permissionsUpdated', userId, permissions: access.permissions, timestamp });
}
