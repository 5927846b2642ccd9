import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { afterCommit, transaction } from '../db';
import { badRequest, conflict, notFound } from '../errors';
import { Permission } from '../models/Permission';
import { Role } from '../models/Role';
import { reachesAccountScope } from '../policies';
import { roleHasPermission, roleHolders, snapshotUserAccess } from '../queries/access';
import { AccessServices, invalidateCredentials, publishAccessChanges } from './accessChanges';
import { keepAnAdministrator, roleGrantsEverything } from './lastAdministrator';
import { deleteById, insertRow, patchLoaded } from '../models/AppModel';

/**
 * Roles and permissions (spec §4.21). Who may do what is decided by the caller through
 * shared/policies (subjects.role, subjects.rolePermission); these commands make the change and
 * tell everyone it touches.
 */

/**
 * Whether another role has this name, as the unique index roles_name_nfkc_unique compares names:
 * in NFKC (full-width `Ａｄｍｉｎ` is `Admin`, a ligature its letters) and lower case. The index
 * settles concurrent requests this read lets through (the loser's 409 is the index's).
 */
async function nameTaken(db: Knex, name: string, exceptId?: string): Promise<boolean> {
  const q = Role.query(db).whereRaw('lower(normalize(name, NFKC)) = lower(normalize(?, NFKC))', [name]);
  if (exceptId) q.whereNot('id', exceptId);
  return !!(await q.first());
}

/**
 * Runs a change to what a role grants or who holds it, then (after the commit) drops every cached
 * credential that could carry the old grants and tells each holder what changed. A change that
 * takes something away (`narrows`) must leave an administrator (409 otherwise, serialised with the
 * other changes that could remove the last one).
 */
async function changeRoleAccess(
  services: AccessServices,
  role: Role,
  change: (trx: Knex.Transaction) => Promise<void>,
  push: { rolePermissionsChanged: boolean; narrows?: boolean },
): Promise<void> {
  await transaction(services.db, async (trx) => {
    const holders = await roleHolders(trx, role.id);
    const before = await snapshotUserAccess(trx, holders);
    // Only a role that grants *:* makes administrators: no other change can remove the last one.
    const mayRemoveAdministrator = push.narrows && (await roleGrantsEverything(trx, role.id));
    await change(trx);
    if (mayRemoveAdministrator) await keepAnAdministrator(trx);
    afterCommit(trx, async () => {
      // API keys holding the role through api_key_roles are affected too: drop everything.
      await invalidateCredentials(services, { all: true });
      const after = await snapshotUserAccess(services.db, holders);
      const roleChange = push.rolePermissionsChanged ? { roleId: role.id, roleName: role.name } : undefined;
      await publishAccessChanges(services, after, { before, roleChange });
    });
  });
}

/** Above this many holders a new description drops every cached credential instead of the holders'. */
const DESCRIPTION_INVALIDATION_MAX_HOLDERS = 1000;

export interface RoleFields {
  name: string;
  description: string | null;
  requires_two_factor: boolean;
}

/** Creates a (non-system) role; 409 when the name is taken, whatever its case or compatibility form. */
export async function createRole(db: Knex, input: RoleFields): Promise<Role> {
  if (await nameTaken(db, input.name)) throw conflict('a role with this name exists');
  return insertRow(Role, db, { id: randomUUID(), ...input, is_system: false });
}

/**
 * Updates a role; 409 when the new name is taken. A rename reaches the holders (rolesUpdated
 * carries role names); other fields change nothing they hold. A new description drops the holders'
 * cached access sets (they list roles with their descriptions, GET /v1/users/{id}/roles).
 */
export async function updateRole(services: AccessServices, role: Role, patch: Partial<RoleFields>): Promise<Role> {
  const renamed = patch.name !== undefined && patch.name !== role.name;
  if (renamed && (await nameTaken(services.db, patch.name!, role.id))) throw conflict('a role with this name exists');
  if (!renamed) {
    const updated = await patchLoaded(role, services.db, patch, 'role');
    if (patch.description !== undefined && patch.description !== role.description) {
      // Only the holders' access sets list the role with its description; nobody's access changed,
      // so everyone else keeps their cached credential. A role held by very many is dropped for all
      // (one message naming them all would be larger than what it saves).
      const holders = await roleHolders(services.db, role.id);
      if (holders.length > DESCRIPTION_INVALIDATION_MAX_HOLDERS) await invalidateCredentials(services, { all: true });
      else if (holders.length) await invalidateCredentials(services, { userIds: holders });
    }
    return updated;
  }
  let updated!: Role;
  await changeRoleAccess(services, role, async (trx) => void (updated = await patchLoaded(role, trx, patch, 'role')), {
    rolePermissionsChanged: false,
  });
  return updated;
}

/**
 * Deletes a role: every holder loses it. 404 when it is gone already (a concurrent delete of the
 * same role: one of them deletes it, announces it and answers 204).
 */
export async function deleteRole(services: AccessServices, role: Role): Promise<void> {
  await changeRoleAccess(
    services,
    role,
    async (trx) => {
      if ((await deleteById(Role, trx, role.id)) === 0) throw notFound('role');
    },
    { rolePermissionsChanged: true, narrows: true },
  );
}

/** Adds a permission to a role; 409 when the role grants it already. */
export async function addRolePermission(services: AccessServices, role: Role, permission: Permission): Promise<void> {
  if (await roleHasPermission(services.db, role.id, permission.id))
    throw conflict('permission already assigned to this role');
  await changeRoleAccess(
    services,
    role,
    async (trx) => void (await trx('role_permissions').insert({ role_id: role.id, permission_id: permission.id })),
    { rolePermissionsChanged: true },
  );
}

/** Takes a permission from a role; 404 when the role does not grant it (also when a concurrent removal took it). */
export async function removeRolePermission(services: AccessServices, role: Role, permissionId: string): Promise<void> {
  await changeRoleAccess(
    services,
    role,
    async (trx) => {
      const removed = await trx('role_permissions').where({ role_id: role.id, permission_id: permissionId }).delete();
      if (removed === 0) throw notFound('role permission');
    },
    // Only taking *:* itself can remove an administrator.
    {
      rolePermissionsChanged: true,
      narrows: !!(await services.db('permissions').where({ id: permissionId, resource: '*', action: '*' }).first('id')),
    },
  );
}

/** Creates a permission; 409 when it exists. */
export async function createPermission(
  db: Knex,
  input: { resource: string; action: string; description: string | null },
): Promise<Permission> {
  // A role holding one would hand it to every API key given the role (policies: account scopes).
  if (reachesAccountScope(`${input.resource}:${input.action}`))
    throw badRequest(
      `resource: ${input.resource}:${input.action} names an account scope; account scopes are granted to credentials by name, not held through roles`,
    );
  if (await Permission.query(db).findOne({ resource: input.resource, action: input.action }))
    throw conflict('this permission exists');
  return insertRow(Permission, db, input);
}
