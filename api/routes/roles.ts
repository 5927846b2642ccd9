import { randomUUID } from 'node:crypto';
import Router from '@koa/router';
import type { Knex } from 'knex';
import { invalidateCredentials, publishAccessChanges, roleHolders, snapshotUserAccess } from '../../shared/commands/accessChanges';
import { conflict, forbidden, notFound } from '../../shared/errors';
import { Permission } from '../../shared/models/Permission';
import { Role } from '../../shared/models/Role';
import { authorizeRoleGrant, authorizeRolePermissionChange } from '../../shared/policies';
import { rolePermissionSet } from '../../shared/queries/access';
import { rowById } from '../../shared/rowLoader';
import { presentPermission, presentRole } from '../../shared/presenters/role';
import { atLeastOne, z, zUuid } from '../../shared/zod';
import { AppContext, AppState, defineRoute } from '../routing';
import type { ApiServices } from '../services';
import { created, noContent, resource } from '../responses';

const roleIdParam = z.object({ id: z.string().min(1).max(64) });
const roleName = z.string().trim().min(1).max(100);
const roleSchema = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  is_system: z.boolean(),
  requires_two_factor: z.boolean(),
  created_at: z.string(),
  updated_at: z.string(),
});
const permissionSchema = z.object({
  id: z.string().uuid(),
  resource: z.string(),
  action: z.string(),
  description: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
const one = <T extends z.ZodTypeAny>(s: T) => z.object({ data: s, _links: z.object({ self: z.string() }) });
const list = <T extends z.ZodTypeAny>(s: T) => z.object({ data: z.array(s), _links: z.object({ self: z.string() }) });

async function loadRole(id: string): Promise<Role> {
  const role = await rowById(Role).load(id);
  if (!role) throw notFound('role');
  return role;
}

async function rolePermissions(roleId: string): Promise<Permission[]> {
  return Permission.query()
    .join('role_permissions as rp', 'rp.permission_id', 'permissions.id')
    .where('rp.role_id', roleId)
    .orderBy(['permissions.resource', 'permissions.action'])
    .select('permissions.*');
}

async function nameTaken(name: string, exceptId?: string): Promise<boolean> {
  const q = Role.query().whereRaw('lower(name) = lower(?)', [name]);
  if (exceptId) q.whereNot('id', exceptId);
  return !!(await q.first());
}

/**
 * Runs a change to what a role grants or who holds it, then (after the commit) drops every cached
 * credential that could carry the old grants and tells each holder what changed.
 */
async function changeRoleAccess(ctx: AppContext, role: Role, change: (trx: Knex.Transaction) => Promise<void>, push: { rolePermissionsChanged: boolean }): Promise<void> {
  const s = ctx.services;
  const holders = await roleHolders(s.db, role.id);
  const before = await snapshotUserAccess(s.db, holders);
  await s.db.transaction(change);
  // API keys holding the role through api_key_roles are affected too: drop everything.
  await invalidateCredentials(s, { all: true });
  const after = await snapshotUserAccess(s.db, holders);
  await publishAccessChanges(s.bus, s.logger, before, after, push.rolePermissionsChanged ? { roleId: role.id, roleName: role.name } : undefined);
}

/** Roles and permissions (spec §4.21). */
export function roleRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(router, { method: 'get', path: '/v1/roles', summary: 'List roles', tags: ['roles'], auth: { permission: 'roles:read' }, responses: { 200: { description: 'Roles', schema: list(roleSchema) } } }, async (ctx) => {
    const roles = await Role.query().orderBy('name');
    ctx.body = resource(ctx, roles.map(presentRole));
  });

  defineRoute(
    router,
    { method: 'get', path: '/v1/roles/:id', summary: 'Get a role', tags: ['roles'], auth: { permission: 'roles:read' }, params: roleIdParam, responses: { 200: { description: 'Role', schema: one(roleSchema) }, 404: { description: 'No such role' } } },
    async (ctx, { params }) => {
      ctx.body = resource(ctx, presentRole(await loadRole(params.id)));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/roles',
      summary: 'Create a role',
      tags: ['roles'],
      auth: { permission: 'roles:write' },
      body: z.object({ name: roleName, description: z.string().max(2000).nullish(), requires_two_factor: z.boolean().default(false) }),
      responses: { 201: { description: 'Created role', schema: one(roleSchema) }, 409: { description: 'Name taken' } },
    },
    async (ctx, { body }) => {
      if (await nameTaken(body.name)) throw conflict('a role with this name exists');
      const role = await Role.query().insertAndFetch({ id: randomUUID(), name: body.name, description: body.description ?? null, requires_two_factor: body.requires_two_factor, is_system: false });
      created(ctx, resource(ctx, presentRole(role), `/v1/roles/${role.id}`));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/roles/:id',
      summary: 'Update a role (system roles cannot be renamed)',
      tags: ['roles'],
      auth: { permission: 'roles:write' },
      params: roleIdParam,
      body: atLeastOne(z.object({ name: roleName.optional(), description: z.string().max(2000).nullish(), requires_two_factor: z.boolean().optional() })),
      responses: { 200: { description: 'Updated role', schema: one(roleSchema) }, 403: { description: 'Renaming a system role' }, 404: { description: 'No such role' }, 409: { description: 'Name taken' } },
    },
    async (ctx, { params, body }) => {
      const role = await loadRole(params.id);
      const renamed = body.name !== undefined && body.name !== role.name;
      if (renamed && role.is_system) throw forbidden('system roles cannot be renamed');
      if (renamed && (await nameTaken(body.name!, role.id))) throw conflict('a role with this name exists');
      const patch: Partial<Role> = {};
      if (body.name !== undefined) patch.name = body.name;
      if (body.description !== undefined) patch.description = body.description;
      if (body.requires_two_factor !== undefined) patch.requires_two_factor = body.requires_two_factor;
      if (renamed) {
        // Holders see role names in rolesUpdated; the permission set does not change.
        await changeRoleAccess(ctx, role, async (trx) => void (await Role.query(trx).patchAndFetchById(role.id, patch)), { rolePermissionsChanged: false });
      } else {
        await Role.query().patchAndFetchById(role.id, patch);
      }
      ctx.body = resource(ctx, presentRole(await loadRole(role.id)));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/roles/:id',
      summary: 'Delete a role (system roles cannot be deleted)',
      tags: ['roles'],
      auth: { permission: 'roles:delete' },
      params: roleIdParam,
      responses: { 204: { description: 'Deleted' }, 403: { description: 'System role' }, 404: { description: 'No such role' } },
    },
    async (ctx, { params }) => {
      const role = await loadRole(params.id);
      if (role.is_system) throw forbidden('system roles cannot be deleted');
      // Deleting a role takes it from every holder: only a caller holding all it grants may.
      authorizeRoleGrant(ctx.state.principal, { id: role.id, permissions: await rolePermissionSet(ctx.services.db, role.id) });
      await changeRoleAccess(ctx, role, async (trx) => void (await Role.query(trx).deleteById(role.id)), { rolePermissionsChanged: true });
      noContent(ctx);
    },
  );

  defineRoute(
    router,
    { method: 'get', path: '/v1/roles/:id/permissions', summary: "List a role's permissions", tags: ['roles'], auth: { permission: 'roles:read' }, params: roleIdParam, responses: { 200: { description: 'Permissions', schema: list(permissionSchema) }, 404: { description: 'No such role' } } },
    async (ctx, { params }) => {
      const role = await loadRole(params.id);
      ctx.body = resource(ctx, (await rolePermissions(role.id)).map(presentPermission));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/roles/:id/permissions',
      summary: 'Grant a permission to a role',
      description: 'Non super admins may only grant permissions they hold. Answers with the role\'s permissions after the change; holders get rolePermissionsChanged and, where their effective set changed, permissionsUpdated.',
      tags: ['roles'],
      auth: { permission: 'roles:write' },
      params: roleIdParam,
      body: z.object({ permission_id: zUuid() }),
      responses: { 201: { description: 'Current permissions of the role', schema: list(permissionSchema) }, 403: { description: 'Escalation' }, 404: { description: 'No such role or permission' }, 409: { description: 'Already assigned' } },
    },
    async (ctx, { params, body }) => {
      const role = await loadRole(params.id);
      const permission = await rowById(Permission).load(body.permission_id);
      if (!permission) throw notFound('permission');
      authorizeRolePermissionChange(ctx.state.principal, `${permission.resource}:${permission.action}`, 'add');
      const exists = await ctx.services.db('role_permissions').where({ role_id: role.id, permission_id: permission.id }).first();
      if (exists) throw conflict('permission already assigned to this role');
      await changeRoleAccess(ctx, role, async (trx) => void (await trx('role_permissions').insert({ role_id: role.id, permission_id: permission.id })), { rolePermissionsChanged: true });
      created(ctx, resource(ctx, (await rolePermissions(role.id)).map(presentPermission)));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/roles/:id/permissions/:permission_id',
      summary: 'Remove a permission from a role',
      tags: ['roles'],
      auth: { permission: 'roles:write' },
      params: z.object({ id: z.string().min(1).max(64), permission_id: zUuid() }),
      responses: { 204: { description: 'Removed' }, 403: { description: 'You do not hold the permission' }, 404: { description: 'No such role, or the permission is not assigned' } },
    },
    async (ctx, { params }) => {
      const role = await loadRole(params.id);
      const exists = await ctx.services.db('role_permissions').where({ role_id: role.id, permission_id: params.permission_id }).first();
      if (!exists) throw notFound('role permission');
      const permission = await rowById(Permission).load(params.permission_id);
      if (permission) authorizeRolePermissionChange(ctx.state.principal, `${permission.resource}:${permission.action}`, 'remove');
      await changeRoleAccess(ctx, role, async (trx) => void (await trx('role_permissions').where({ role_id: role.id, permission_id: params.permission_id }).delete()), { rolePermissionsChanged: true });
      noContent(ctx);
    },
  );

  defineRoute(router, { method: 'get', path: '/v1/permissions', summary: 'List permissions', tags: ['permissions'], auth: { permission: 'permissions:read' }, responses: { 200: { description: 'Permissions', schema: list(permissionSchema) } } }, async (ctx) => {
    const perms = await Permission.query().orderBy(['resource', 'action']);
    ctx.body = resource(ctx, perms.map(presentPermission));
  });

  defineRoute(
    router,
    { method: 'get', path: '/v1/permissions/:id', summary: 'Get a permission', tags: ['permissions'], auth: { permission: 'permissions:read' }, params: z.object({ id: zUuid() }), responses: { 200: { description: 'Permission', schema: one(permissionSchema) }, 404: { description: 'No such permission' } } },
    async (ctx, { params }) => {
      const p = await rowById(Permission).load(params.id);
      if (!p) throw notFound('permission');
      ctx.body = resource(ctx, presentPermission(p));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/permissions',
      summary: 'Create a permission',
      tags: ['permissions'],
      auth: { permission: 'permissions:write' },
      body: z.object({
        resource: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, 'must be lowercase letters, digits and underscores'),
        action: z.string().regex(/^[a-z][a-z0-9_.]{0,63}$/, 'must be lowercase letters, digits, underscores and dots'),
        description: z.string().max(2000).nullish(),
      }),
      responses: { 201: { description: 'Created permission', schema: one(permissionSchema) }, 409: { description: 'Exists' } },
    },
    async (ctx, { body }) => {
      if (await Permission.query().findOne({ resource: body.resource, action: body.action })) throw conflict('this permission exists');
      const p = await Permission.query().insertAndFetch({ resource: body.resource, action: body.action, description: body.description ?? null });
      created(ctx, resource(ctx, presentPermission(p), `/v1/permissions/${p.id}`));
    },
  );
}
