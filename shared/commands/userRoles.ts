import type { Knex } from 'knex';
import { Role } from '../models/Role';
import { snapshotUserAccess } from '../queries/access';
import { AccessServices, invalidateCredentials, publishAccessChanges } from './accessChanges';
import { byName } from '../queries/byName';

/** A user's roles, by name. */
export async function userRoles(db: Knex, userId: string): Promise<Role[]> {
  return Role.query(db)
    .join('user_roles as ur', 'ur.role_id', 'roles.id')
    .where('ur.user_id', userId)
    .orderByRaw(byName('roles'))
    .select('roles.*');
}

/**
 * After a user's roles changed (and committed): cached credentials are dropped on every instance,
 * and the user's clients get permissionsUpdated and rolesUpdated with the new effective sets.
 */
export async function announceUserAccessChanged(services: AccessServices, userId: string): Promise<void> {
  await invalidateCredentials(services, { userIds: [userId] });
  await publishAccessChanges(services, await snapshotUserAccess(services.db, [userId]));
}
