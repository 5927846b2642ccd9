import { attributed, Attribution, recordAuditEvent } from '../audit';
import type { ServiceContext } from '../context';
import { afterCommit, transaction } from '../db';
import { conflict, notFound } from '../errors';
import { keepAnAdministrator, roleGrantsEverything } from './lastAdministrator';
import { announceUserAccessChanged } from './userRoles';

/** The `user_updated` event of a role given or taken. */
const roleEvent = (userId: string, action: 'role_assigned' | 'role_removed', roleId: string) => ({
  user_id: userId,
  event_type: 'user_updated',
  resource_type: 'user',
  resource_id: userId,
  metadata: { action, role_id: roleId },
});

/**
 * Gives a user a role (409 when they hold it already). After the commit the user's cached
 * credentials are dropped and their clients get the new roles and permissions.
 */
export async function assignRole(ctx: ServiceContext, userId: string, roleId: string, by: Attribution): Promise<void> {
  await transaction(ctx.db, async (trx) => {
    const inserted = await trx('user_roles')
      .insert({ user_id: userId, role_id: roleId })
      .onConflict(['user_id', 'role_id'])
      .ignore()
      .returning('role_id');
    if (!inserted.length) throw conflict('the user already has this role');
    await recordAuditEvent(attributed(by, roleEvent(userId, 'role_assigned', roleId)), trx);
    afterCommit(trx, () => announceUserAccessChanged(ctx, userId));
  });
}

/** Takes a role from a user (404 when not assigned), announced like `assignRole`. */
export async function removeRole(ctx: ServiceContext, userId: string, roleId: string, by: Attribution): Promise<void> {
  await transaction(ctx.db, async (trx) => {
    const deleted = await trx('user_roles').where({ user_id: userId, role_id: roleId }).delete();
    if (!deleted) throw notFound('role assignment');
    // Only a role that grants *:* makes an administrator.
    if (await roleGrantsEverything(trx, roleId)) await keepAnAdministrator(trx);
    await recordAuditEvent(attributed(by, roleEvent(userId, 'role_removed', roleId)), trx);
    afterCommit(trx, () => announceUserAccessChanged(ctx, userId));
  });
}
