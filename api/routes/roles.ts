import Router from '@koa/router';
import type { Knex } from 'knex';
import {
  addRolePermission,
  createPermission,
  createRole,
  deleteRole,
  removeRolePermission,
  updateRole,
} from '../../shared/commands/roles';
import { notFound } from '../../shared/errors';
import { Permission } from '../../shared/models/Permission';
import { Role } from '../../shared/models/Role';
import { authorize, PermissionSet, subjects } from '../../shared/policies';
import { loadRoleHolderPermissions, roleHasPermission, rolePermissions } from '../../shared/queries/access';
import { findOr404, findReferenced, rowById } from '../../shared/rowLoader';
import { permissionSchema, presentPermission, presentRole, roleSchema } from '../../shared/presenters/role';
import { zDisplayName } from '../../shared/domain/displayNames';
import { emptyPatch, z, zChars, zUuid } from '../../shared/zod';
import { AppState, defineRoute } from '../routing';
import type { ApiServices } from '../services';
import { created, listSchema, noContent, resource, resourceSchema } from '../responses';
import { byName } from '../../shared/queries/byName';

const roleIdParam = z.object({ id: zChars({ min: 1, max: 64 }) });
/**
 * A role's name is an identity (shared/domain/displayNames): no invisible characters, no mix of
 * look-alike scripts. Names are kept in Unicode NFC, and two names are one (409) when they are
 * equal in NFKC and lower case: `Café` typed precomposed or as `e` + combining accent, `ADMIN`, and
 * full-width `Ａｄｍｉｎ` are all `Admin` (shared/commands/roles.ts, and the unique index behind it).
 * The length is that of the NFC form, which is what is stored: NFC can lengthen a name (U+FB2C is
 * three code points in NFC), and a name the check let through the column (varchar(100)) refused
 * with a 400 naming no field.
 */
const roleName = zDisplayName(
  100,
  z
    .string()
    .trim()
    .transform((s) => s.normalize('NFC')),
);
const loadRole = (id: string) => findOr404(Role, id, 'role');
/** Everything the role's holders hold: a change to the role needs managing all of them (policies). */
const holders = async (db: Knex, roleId: string) => new PermissionSet(await loadRoleHolderPermissions(db, roleId));

/** Roles and permissions (spec §4.21). */
export function roleRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/roles',
      summary: 'List roles',
      tags: ['roles'],
      auth: { permission: 'roles:read' },
      cacheBy: ['roles'],
      responses: { 200: { description: 'Roles', schema: listSchema(roleSchema) } },
    },
    async (ctx) => {
      ctx.body = resource(ctx, (await Role.query(ctx.services.db).orderByRaw(byName())).map(presentRole));
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/roles/:id',
      summary: 'Get a role',
      tags: ['roles'],
      auth: { permission: 'roles:read' },
      params: roleIdParam,
      responses: {
        200: { description: 'Role', schema: resourceSchema(roleSchema) },
        404: { description: 'No such role' },
      },
    },
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
      body: z.object({
        name: roleName,
        description: zChars({ max: 2000 }).nullish(),
        requires_two_factor: z.boolean().default(false),
      }),
      responses: {
        201: { description: 'Created role', schema: resourceSchema(roleSchema) },
        409: { description: 'Name taken' },
      },
    },
    async (ctx, { body }) => {
      const role = await createRole(ctx.services.db, {
        name: body.name,
        description: body.description ?? null,
        requires_two_factor: body.requires_two_factor,
      });
      created(ctx, resource(ctx, presentRole(role), `/v1/roles/${role.id}`));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/roles/:id',
      summary: 'Update a role (system roles cannot be renamed)',
      description: 'Needs holding every permission the role grants, as for giving or deleting it.',
      tags: ['roles'],
      auth: { permission: 'roles:write' },
      params: roleIdParam,
      body: z.object({
        name: roleName.optional(),
        description: zChars({ max: 2000 }).nullish(),
        requires_two_factor: z.boolean().optional(),
      }),
      responses: {
        200: { description: 'Updated role', schema: resourceSchema(roleSchema) },
        403: { description: 'Renaming a system role, or a role granting permissions you do not hold' },
        404: { description: 'No such role' },
        409: { description: 'Name taken' },
      },
    },
    async (ctx, { params, body }) => {
      const role = await loadRole(params.id);
      const subject = subjects.role(
        role,
        await ctx.services.credentials.access.role(role.id),
        await holders(ctx.services.db, role.id),
      );
      authorize(ctx.state.principal, 'update', subject);
      if (body.name !== undefined && body.name !== role.name) authorize(ctx.state.principal, 'rename', subject);
      const patch: Parameters<typeof updateRole>[2] = {};
      if (body.name !== undefined) patch.name = body.name;
      if (body.description !== undefined) patch.description = body.description;
      if (body.requires_two_factor !== undefined) patch.requires_two_factor = body.requires_two_factor;
      // Every field is optional (decisions: PATCH /v1/roles/{id}); nothing named, nothing changes.
      ctx.body = resource(ctx, presentRole(emptyPatch(patch) ? role : await updateRole(ctx.services, role, patch)));
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
      responses: {
        204: { description: 'Deleted' },
        403: { description: 'System role' },
        404: { description: 'No such role' },
        409: { description: 'The role is what makes the last administrator one (docs: the last administrator)' },
      },
    },
    async (ctx, { params }) => {
      const role = await loadRole(params.id);
      authorize(
        ctx.state.principal,
        'delete',
        subjects.role(
          role,
          await ctx.services.credentials.access.role(role.id),
          await holders(ctx.services.db, role.id),
        ),
      );
      await deleteRole(ctx.services, role);
      noContent(ctx);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/roles/:id/permissions',
      summary: "List a role's permissions",
      tags: ['roles'],
      auth: { permission: 'roles:read' },
      cacheBy: ['roles', 'role_permissions', 'permissions'],
      params: roleIdParam,
      responses: {
        200: { description: 'Permissions', schema: listSchema(permissionSchema) },
        404: { description: 'No such role' },
      },
    },
    async (ctx, { params }) => {
      const role = await loadRole(params.id);
      ctx.body = resource(ctx, (await rolePermissions(ctx.services.db, role.id)).map(presentPermission));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/roles/:id/permissions',
      summary: 'Grant a permission to a role',
      description:
        "Non super admins may only grant permissions they hold. Answers with the role's permissions after the change; holders get rolePermissionsChanged and, where their effective set changed, permissionsUpdated.",
      tags: ['roles'],
      auth: { permission: 'roles:write' },
      params: roleIdParam,
      body: z.object({ permission_id: zUuid() }),
      responses: {
        201: { description: 'Current permissions of the role', schema: listSchema(permissionSchema) },
        400: { description: 'Invalid input, or no such permission (`permission_id: no such permission`)' },
        403: { description: 'Escalation' },
        404: { description: 'No such role' },
        409: { description: 'Already assigned' },
      },
    },
    async (ctx, { params, body }) => {
      const role = await loadRole(params.id);
      const permission = await findReferenced(Permission, body.permission_id, 'permission_id', 'permission');
      authorize(
        ctx.state.principal,
        'add',
        subjects.rolePermission(`${permission.resource}:${permission.action}`, await holders(ctx.services.db, role.id)),
      );
      await addRolePermission(ctx.services, role, permission);
      created(ctx, resource(ctx, (await rolePermissions(ctx.services.db, role.id)).map(presentPermission)));
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
      params: z.object({ id: zChars({ min: 1, max: 64 }), permission_id: zUuid() }),
      responses: {
        204: { description: 'Removed' },
        403: { description: 'You do not hold the permission' },
        404: { description: 'No such role, or the permission is not assigned' },
        409: { description: 'This would leave no administrator (a user holding *:*)' },
      },
    },
    async (ctx, { params }) => {
      const role = await loadRole(params.id);
      if (!(await roleHasPermission(ctx.services.db, role.id, params.permission_id))) throw notFound('role permission');
      const permission = await rowById(Permission).load(params.permission_id);
      if (permission)
        authorize(
          ctx.state.principal,
          'remove',
          subjects.rolePermission(
            `${permission.resource}:${permission.action}`,
            await holders(ctx.services.db, role.id),
          ),
        );
      await removeRolePermission(ctx.services, role, params.permission_id);
      noContent(ctx);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/permissions',
      summary: 'List permissions',
      tags: ['permissions'],
      auth: { permission: 'permissions:read' },
      cacheBy: ['permissions'],
      responses: { 200: { description: 'Permissions', schema: listSchema(permissionSchema) } },
    },
    async (ctx) => {
      ctx.body = resource(
        ctx,
        (await Permission.query(ctx.services.db).orderBy(['resource', 'action'])).map(presentPermission),
      );
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/permissions/:id',
      summary: 'Get a permission',
      tags: ['permissions'],
      auth: { permission: 'permissions:read' },
      params: z.object({ id: zUuid() }),
      responses: {
        200: { description: 'Permission', schema: resourceSchema(permissionSchema) },
        404: { description: 'No such permission' },
      },
    },
    async (ctx, { params }) => {
      ctx.body = resource(ctx, presentPermission(await findOr404(Permission, params.id, 'permission')));
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
        description: zChars({ max: 2000 }).nullish(),
      }),
      responses: {
        201: { description: 'Created permission', schema: resourceSchema(permissionSchema) },
        409: { description: 'Exists' },
      },
    },
    async (ctx, { body }) => {
      const p = await createPermission(ctx.services.db, {
        resource: body.resource,
        action: body.action,
        description: body.description ?? null,
      });
      created(ctx, resource(ctx, presentPermission(p), `/v1/permissions/${p.id}`));
    },
  );
}
