import type { Knex } from 'knex';
import { PermissionSet } from '../policies';

/** Effective grants of a user: the union of their roles' permissions, and the role ids. */
export async function loadUserAccess(db: Knex, userId: string): Promise<{ permissions: string[]; roleIds: string[] }> {
  const rows: Array<{ role_id: string; perm: string | null }> = await db('user_roles as ur')
    .leftJoin('role_permissions as rp', 'rp.role_id', 'ur.role_id')
    .leftJoin('permissions as p', 'p.id', 'rp.permission_id')
    .where('ur.user_id', userId)
    .select('ur.role_id', db.raw("p.resource || ':' || p.action as perm"));
  return {
    roleIds: [...new Set(rows.map((r) => r.role_id))].sort(),
    permissions: [...new Set(rows.map((r) => r.perm).filter((p): p is string => !!p))].sort(),
  };
}

/** Grants and role ids given to an API key through api_key_roles. */
export async function loadApiKeyRoleAccess(db: Knex, apiKeyId: string): Promise<{ permissions: string[]; roleIds: string[] }> {
  const rows: Array<{ role_id: string; perm: string | null }> = await db('api_key_roles as kr')
    .leftJoin('role_permissions as rp', 'rp.role_id', 'kr.role_id')
    .leftJoin('permissions as p', 'p.id', 'rp.permission_id')
    .where('kr.api_key_id', apiKeyId)
    .select('kr.role_id', db.raw("p.resource || ':' || p.action as perm"));
  return {
    roleIds: [...new Set(rows.map((r) => r.role_id))].sort(),
    permissions: [...new Set(rows.map((r) => r.perm).filter((p): p is string => !!p))].sort(),
  };
}

/** The active ban of a user, if any (permanent, or timed and not yet expired). */
export async function findActiveBan(db: Knex, userId: string): Promise<{ id: string; expires_at: Date | null; is_permanent: boolean; reason: string | null } | undefined> {
  return db('bans')
    .where('user_id', userId)
    .whereNull('unbanned_at')
    .where((q) => q.whereNull('expires_at').orWhere('expires_at', '>', db.fn.now()))
    .orderBy('banned_at', 'desc')
    .first('id', 'expires_at', 'is_permanent', 'reason');
}

/** A user's effective permissions as a set (hierarchy checks compare the caller's against it). */
export async function userPermissionSet(db: Knex, userId: string): Promise<PermissionSet> {
  return new PermissionSet((await loadUserAccess(db, userId)).permissions);
}

/** The permissions a role grants, as a set (granting or taking the role needs all of them). */
export async function rolePermissionSet(db: Knex, roleId: string): Promise<PermissionSet> {
  const rows: Array<{ perm: string }> = await db('role_permissions as rp')
    .join('permissions as p', 'p.id', 'rp.permission_id')
    .where('rp.role_id', roleId)
    .select(db.raw("p.resource || ':' || p.action as perm"));
  return new PermissionSet(rows.map((r) => r.perm));
}
