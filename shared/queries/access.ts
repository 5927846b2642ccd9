import type { Knex } from 'knex';
import { Permission } from '../models/Permission';
import { Role } from '../models/Role';
import { compiledOnce, groupBy, turnBatcherByDb, withoutColumns } from '../rowLoader';
import { byName } from './byName';

type Grants = { permissions: string[]; roleIds: string[] };

/** Role ids and permissions of role rows joined to their permissions (a role without any has perm null). */
function grantsOf(rows: ReadonlyArray<{ role_id: string; perm: string | null }>): Grants {
  return {
    roleIds: [...new Set(rows.map((r) => r.role_id))].sort(),
    permissions: [...new Set(rows.map((r) => r.perm).filter((p): p is string => !!p))].sort(),
  };
}

/** Effective grants of a user: the union of their roles' permissions, and the role ids. */
export async function loadUserAccess(db: Knex, userId: string): Promise<Grants> {
  const rows: Array<{ role_id: string; perm: string | null }> = await db('user_roles as ur')
    .leftJoin('role_permissions as rp', 'rp.role_id', 'ur.role_id')
    .leftJoin('permissions as p', 'p.id', 'rp.permission_id')
    .where('ur.user_id', userId)
    .select('ur.role_id', db.raw("p.resource || ':' || p.action as perm"));
  return grantsOf(rows);
}

/** Grants and role ids of a turn's API keys, one statement (a fleet's first requests load many keys at once). */
const keyRoleAccessInTurn = turnBatcherByDb<Grants>(async (db, apiKeyIds) => {
  const rows: Array<{ api_key_id: string; role_id: string; perm: string | null }> = await db('api_key_roles as kr')
    .leftJoin('role_permissions as rp', 'rp.role_id', 'kr.role_id')
    .leftJoin('permissions as p', 'p.id', 'rp.permission_id')
    .whereRaw('kr.api_key_id = ANY(?::uuid[])', [apiKeyIds])
    .select('kr.api_key_id', 'kr.role_id', db.raw("p.resource || ':' || p.action as perm"));
  const out = new Map<string, Grants>();
  for (const [apiKeyId, own] of groupBy(rows, (r) => r.api_key_id)) {
    out.set(apiKeyId, grantsOf(own));
  }
  return out;
});

/** Grants and role ids given to an API key through api_key_roles (batched per turn). */
export async function loadApiKeyRoleAccess(db: Knex, apiKeyId: string): Promise<Grants> {
  return (await keyRoleAccessInTurn(db, apiKeyId)) ?? { permissions: [], roleIds: [] };
}

/** The active ban of a user, if any (permanent, or timed and not yet expired). */
export async function findActiveBan(
  db: Knex,
  userId: string,
): Promise<{ id: string; expires_at: Date | null; is_permanent: boolean; reason: string | null } | undefined> {
  return db('bans')
    .where('user_id', userId)
    .whereNull('unbanned_at')
    .where((q) => q.whereNull('expires_at').orWhere('expires_at', '>', db.fn.now()))
    .orderBy('banned_at', 'desc')
    .first('id', 'expires_at', 'is_permanent', 'reason');
}

/** The permissions a role grants, as `resource:action` (AccessSets.role caches them as a set). */
export async function loadRolePermissions(db: Knex, roleId: string): Promise<string[]> {
  const rows: Array<{ perm: string }> = await db('role_permissions as rp')
    .join('permissions as p', 'p.id', 'rp.permission_id')
    .where('rp.role_id', roleId)
    .select(db.raw("p.resource || ':' || p.action as perm"));
  return rows.map((r) => r.perm);
}

/**
 * Everything the holders of a role hold: the union of the permissions of every role held by a user
 * who holds this one, or who owns an API key that carries it. Changing the role changes it for all
 * of them, so the hierarchy rule asks the actor to hold all of this (one statement, O(holders)).
 */
export async function loadRoleHolderPermissions(db: Knex, roleId: string): Promise<string[]> {
  const rows: Array<{ perm: string }> = await db
    .raw(
      `SELECT DISTINCT p.resource || ':' || p.action AS perm
       FROM role_permissions rp JOIN permissions p ON p.id = rp.permission_id
      WHERE rp.role_id IN (
        SELECT o.role_id FROM user_roles h JOIN user_roles o ON o.user_id = h.user_id WHERE h.role_id = :roleId
        UNION
        SELECT o.role_id FROM api_key_roles kr JOIN api_keys k ON k.id = kr.api_key_id
          JOIN user_roles o ON o.user_id = k.user_id WHERE kr.role_id = :roleId)`,
      { roleId },
    )
    .then((r: { rows: Array<{ perm: string }> }) => r.rows);
  return rows.map((r) => r.perm);
}

/** What a user holds: effective permissions and role ids (both sorted), roles in name order. */
export interface UserAccessSet {
  permissions: string[];
  roleIds: string[];
  roles: Array<{ id: string; name: string; description: string | null }>;
}

/**
 * The access sets of many users in one statement (AccessSets batches its misses through it). A
 * user without roles (or no such user) gets empty sets. Roles come in name order, as
 * GET /v1/users/{id}/roles lists them.
 */
export async function loadUserAccessSets(db: Knex, userIds: string[]): Promise<Map<string, UserAccessSet>> {
  const rows: Array<{ user_id: string; id: string; name: string; description: string | null; perm: string | null }> =
    await db('user_roles as ur')
      .join('roles as r', 'r.id', 'ur.role_id')
      .leftJoin('role_permissions as rp', 'rp.role_id', 'ur.role_id')
      .leftJoin('permissions as p', 'p.id', 'rp.permission_id')
      .whereRaw('ur.user_id = ANY(?::uuid[])', [userIds])
      .orderBy(['r.name', 'r.id'])
      .select('ur.user_id', 'r.id', 'r.name', 'r.description', db.raw("p.resource || ':' || p.action as perm"));
  const acc = new Map<string, { perms: Set<string>; roles: Map<string, UserAccessSet['roles'][number]> }>();
  for (const id of userIds) acc.set(id, { perms: new Set(), roles: new Map() });
  for (const r of rows) {
    const a = acc.get(r.user_id);
    if (!a) continue;
    if (!a.roles.has(r.id)) a.roles.set(r.id, { id: r.id, name: r.name, description: r.description });
    if (r.perm) a.perms.add(r.perm);
  }
  const out = new Map<string, UserAccessSet>();
  for (const [id, a] of acc) {
    const roles = [...a.roles.values()];
    out.set(id, { permissions: [...a.perms].sort(), roleIds: roles.map((r) => r.id).sort(), roles });
  }
  return out;
}

/** What a user holds through their roles, as pushed to clients (spec §6); roles in name order. */
export interface UserAccessSnapshot {
  permissions: string[];
  roleIds: string[];
  roles: string[];
}

/**
 * Effective permissions and roles of many users (role-wide changes touch every holder of the role).
 * Users without any role are present with empty sets. Roles come in name order (as
 * GET /v1/users/{id}/roles lists them), `roleIds` in the same order.
 *
 * Two reads: who holds which role, then what those roles grant, composed here. A join of both would
 * send a row per user, role and permission (80,000 rows for a role with 10,000 holders); these
 * send one per holding plus one per role and permission. Ids go as one array parameter, not one
 * per user: a role may have more holders than a statement has parameters (65,535).
 */
export async function snapshotUserAccess(
  db: Knex | Knex.Transaction,
  userIds: string[],
): Promise<Map<string, UserAccessSnapshot>> {
  const out = new Map<string, UserAccessSnapshot>();
  if (!userIds.length) return out;
  const holdings: Array<{ user_id: string; role_id: string }> = await db('user_roles')
    .whereRaw('user_id = ANY(?::uuid[])', [userIds])
    .select('user_id', 'role_id');
  const roleIds = [...new Set(holdings.map((h) => h.role_id))];
  const grants: Array<{ id: string; name: string; perm: string | null }> = roleIds.length
    ? await db('roles as r')
        .leftJoin('role_permissions as rp', 'rp.role_id', 'r.id')
        .leftJoin('permissions as p', 'p.id', 'rp.permission_id')
        .whereRaw('r.id = ANY(?::text[])', [roleIds])
        // The database's collation orders the names, as on every other role list.
        .orderBy(['r.name', 'r.id'])
        .select('r.id', 'r.name', db.raw("p.resource || ':' || p.action as perm"))
    : [];
  const roles = new Map<string, { name: string; rank: number; perms: string[] }>();
  for (const g of grants) {
    let r = roles.get(g.id);
    if (!r) roles.set(g.id, (r = { name: g.name, rank: roles.size, perms: [] }));
    if (g.perm) r.perms.push(g.perm);
  }
  // A role deleted between the two reads is no longer held.
  const held = new Map<string, string[]>();
  for (const id of userIds) held.set(id, []);
  for (const h of holdings) if (roles.has(h.role_id)) held.get(h.user_id)?.push(h.role_id);
  // Users holding the same roles (most holders of a role) share one computed snapshot.
  const byRoleSet = new Map<string, UserAccessSnapshot>();
  for (const [id, ids] of held) {
    ids.sort((a, b) => roles.get(a)!.rank - roles.get(b)!.rank);
    const key = ids.join('\n');
    let snap = byRoleSet.get(key);
    if (!snap) {
      const perms = new Set<string>();
      for (const r of ids) for (const p of roles.get(r)!.perms) perms.add(p);
      snap = { permissions: [...perms].sort(), roleIds: ids, roles: ids.map((r) => roles.get(r)!.name) };
      byRoleSet.set(key, snap);
    }
    out.set(id, snap);
  }
  return out;
}

/** Users holding a role (read before a change, so a deleted role still knows its holders). */
export async function roleHolders(db: Knex | Knex.Transaction, roleId: string): Promise<string[]> {
  const rows: Array<{ user_id: string }> = await db('user_roles').where('role_id', roleId).select('user_id');
  return rows.map((r) => r.user_id);
}

/** A role's permissions, by resource and action. */
export async function rolePermissions(db: Knex, roleId: string): Promise<Permission[]> {
  return Permission.query(db)
    .join('role_permissions as rp', 'rp.permission_id', 'permissions.id')
    .where('rp.role_id', roleId)
    .orderBy(['permissions.resource', 'permissions.action'])
    .select('permissions.*');
}

/** Whether a role grants a permission (by permission id). */
export async function roleHasPermission(
  db: Knex | Knex.Transaction,
  roleId: string,
  permissionId: string,
): Promise<boolean> {
  return !!(await db('role_permissions').where({ role_id: roleId, permission_id: permissionId }).first('role_id'));
}

/** The roles put on an API key, by name. */
export async function apiKeyRoles(db: Knex, apiKeyId: string): Promise<Role[]> {
  return (await keyRolesInTurn(db, apiKeyId)) ?? [];
}

/** The roles of every API key asked for in one turn: one statement. */
const keyRolesSql = compiledOnce((db) =>
  db('roles')
    .join('api_key_roles as kr', 'kr.role_id', 'roles.id')
    .whereRaw('kr.api_key_id = ANY(?)', [[]])
    .orderByRaw(byName('roles'))
    .select('roles.*', 'kr.api_key_id as _api_key_id'),
);
const KEY_COLUMN: ReadonlySet<string> = new Set(['_api_key_id']);
const keyRolesInTurn = turnBatcherByDb(async (db, keyIds) => {
  const { rows } = await db.raw<{ rows: Array<Record<string, unknown>> }>(keyRolesSql(db), [keyIds]);
  return groupBy(
    rows,
    (r) => String(r._api_key_id),
    (r) => Role.fromDatabaseJson(withoutColumns(r, KEY_COLUMN)) as Role,
  );
});
