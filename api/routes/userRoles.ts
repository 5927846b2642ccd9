import Router from '@koa/router';
import { assignRole, removeRole } from '../../shared/commands/assignRoles';
import { userRoles } from '../../shared/commands/userRoles';
import { notFound } from '../../shared/errors';
import { Role } from '../../shared/models/Role';
import { authorize, subjects } from '../../shared/policies';
import { presentUserRole, userRoleSchema } from '../../shared/presenters/userRole';
import { hasRole } from '../../shared/queries/users';
import { findOr404, findReferenced } from '../../shared/rowLoader';
import { z, zChars } from '../../shared/zod';
import { loadUser, resolveUserRef, userIdParam, zUserRef } from '../params';
import { created, listSchema, noContent, resource } from '../responses';
import { defineRoute, AppContext, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['users'];
const self = (permission: string) => ({ permission, self: 'id' });
const roleId = () => zChars({ min: 1, max: 64 });

/** Giving or taking a role needs every permission it grants (shared/policies decides). */
async function authorizeRoleChange(ctx: AppContext, role: Role): Promise<void> {
  authorize(ctx.state.principal, 'grant', subjects.role(role, await ctx.services.credentials.access.role(role.id)));
}

async function presentRoles(ctx: AppContext, userId: string) {
  return (await userRoles(ctx.services.db, userId)).map(presentUserRole);
}

/** A user's access (spec §4.11): effective permissions, roles, role assignment. */
export function userRoleRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/:id/permissions',
      summary: "A user's effective permissions (role-based included)",
      tags: TAG,
      auth: self('users:read'),
      params: userIdParam,
      responses: { 200: { description: '{permissions}', schema: z.object({ permissions: z.array(z.string()) }) } },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await loadUser(ctx.services.db, id, { includeDeleted: true });
      ctx.body = { permissions: (await ctx.services.credentials.access.user(id)).permissions };
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/:id/roles',
      summary: "A user's roles",
      tags: TAG,
      auth: self('users:read'),
      params: userIdParam,
      responses: { 200: { description: '{roles}', schema: z.object({ roles: z.array(userRoleSchema) }) } },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await loadUser(ctx.services.db, id, { includeDeleted: true });
      ctx.body = { roles: (await ctx.services.credentials.access.user(id)).roles.map(presentUserRole) };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/:id/roles',
      summary: 'Assign a role to a user',
      description:
        'Answers 201 with the current list. A caller who is not a super admin may only assign roles whose permissions they hold.',
      tags: TAG,
      auth: { permission: 'users:write', manages: 'id' },
      params: userIdParam,
      body: z.object({ role_id: roleId() }),
      responses: {
        201: { description: '{data: [roles]}', schema: listSchema(userRoleSchema) },
        400: { description: 'Invalid input, or no such role (`role_id: no such role`)' },
        404: { description: 'No such user' },
        409: { description: 'Already assigned' },
      },
    },
    async (ctx, { params, body }) => {
      const id = resolveUserRef(ctx, params.id);
      await loadUser(ctx.services.db, id);
      const role = await findReferenced(Role, body.role_id, 'role_id', 'role');
      await authorizeRoleChange(ctx, role);
      await assignRole(ctx.services, id, role.id, requestAttribution(ctx));
      created(ctx, resource(ctx, await presentRoles(ctx, id), `/v1/users/${id}/roles`));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/users/:id/roles/:role_id',
      summary: 'Remove a role from a user',
      tags: TAG,
      auth: { permission: 'users:write', manages: 'id' },
      params: z.object({ id: zUserRef(), role_id: roleId() }),
      responses: {
        204: { description: 'Removed' },
        404: { description: 'No such user, or role not assigned' },
        409: { description: 'It would leave no administrator (docs/access-control.md)' },
      },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await loadUser(ctx.services.db, id, { includeDeleted: true });
      if (!(await hasRole(ctx.services.db, id, params.role_id))) throw notFound('role assignment');
      await authorizeRoleChange(ctx, await findOr404(Role, params.role_id, 'role'));
      await removeRole(ctx.services, id, params.role_id, requestAttribution(ctx));
      noContent(ctx);
    },
  );
}
