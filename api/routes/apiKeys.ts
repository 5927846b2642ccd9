import Router from '@koa/router';
import {
  ApiKeyChanges,
  assignApiKeyRole,
  deleteApiKey,
  issueApiKey,
  regenerateApiKey,
  removeApiKeyRole,
  updateApiKey,
} from '../../shared/commands/apiKeys';
import { ApiKey } from '../../shared/models/ApiKey';
import { Role } from '../../shared/models/Role';
import {
  Action,
  actingUserId,
  apiKeyListScope,
  apiKeyListScopeKey,
  authorize,
  authorizeGrant,
  authorizeKeyTakeover,
  can,
  extendsKeyLife,
  PermissionSet,
  Principal,
  subjects,
} from '../../shared/policies';
import { apiKeyRoles, loadApiKeyRoleAccess } from '../../shared/queries/access';
import { apiKeySchema, issuedApiKeySchema, presentApiKey, presentIssuedApiKey } from '../../shared/presenters/apiKey';
import { presentRole, roleSchema } from '../../shared/presenters/role';
import { findOr404, findReferenced } from '../../shared/rowLoader';
import { emptyPatch, z, zChars, zDateTime, zList, zQueryInt, zScope, zUuid } from '../../shared/zod';
import { paginate, paginatedBody } from '../pagination';
import { created, listSchema, noContent, pageSchema, resource, resourceSchema } from '../responses';
import { AppState, defineRoute, requestAttribution } from '../routing';
import type { ApiServices } from '../services';

const zScopes = () => zList(zScope(), { max: 200 }).transform((s) => [...new Set(s)]);
/** A date-time's own checks, to say "in the future" only of a value that is one (one problem per field). */
const aDateTime = zDateTime();
const zFutureDate = () =>
  zDateTime().refine((v) => !aDateTime.safeParse(v).success || Date.parse(v) > Date.now(), 'must be in the future');

const idParam = z.object({ id: zUuid() });
/** A page's size when `page` alone asks for pages of GET /v1/api-keys. */
const API_KEY_PAGE_LIMIT = 20;
/** GET /v1/api-keys: pages only when asked for (without both, the whole list as the spec shows it). */
const apiKeyListQuery = z.object({
  page: zQueryInt(1, 1_000_000).optional(),
  limit: zQueryInt(1, 100).optional(),
});
const keyRolesBody = listSchema(roleSchema);
const toDate = (v: string | null | undefined) => (v ? new Date(v) : null);

/**
 * Refuses (403) a caller that would take over more than it holds by regenerating the key or
 * switching it back on (`authorizeKeyTakeover`): reads what the key confers, its roles' permissions
 * bounded by its owner's current permissions.
 */
async function authorizeTakeover(ctx: { services: ApiServices }, p: Principal, key: ApiKey): Promise<void> {
  const [roles, owner] = await Promise.all([
    loadApiKeyRoleAccess(ctx.services.db, key.id),
    key.user_id ? ctx.services.credentials.access.user(key.user_id) : undefined,
  ]);
  const bound = owner ? owner.permissionSet : new PermissionSet(roles.permissions);
  authorizeKeyTakeover(p, { scopes: key.scopes as string[], isSystem: key.is_system }, bound, roles.permissions);
}

/** The key with this id (404), if the caller may do `action` on it (403). */
async function loadKey(p: Principal, id: string, action: Action<'apiKey'>): Promise<ApiKey> {
  const key = await findOr404(ApiKey, id, 'api key');
  authorize(p, action, subjects.apiKey(key));
  return key;
}

/** API keys (spec §4.20): key shown once, stored as a hash, no scope or role escalation. */
export function apiKeyRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/api-keys',
      summary: "List API keys (the caller's own; super admins see all)",
      description:
        'Newest first. Without `page` and `limit`, every key as `{data}` (spec §4.20). With either, one page as ' +
        'every paginated list answers it (`{data, pagination, _links}`; `limit` 20 unless given): a fleet with a ' +
        'key per tracker has thousands.',
      tags: ['api-keys'],
      auth: { permission: 'api_keys:read' },
      query: apiKeyListQuery,
      responses: {
        200: {
          description: 'Keys without key material: the whole list, or the page asked for',
          schema: z.union([listSchema(apiKeySchema), pageSchema(apiKeySchema)]),
        },
      },
      // The list depends on the caller only through which keys they may list: one cached answer
      // for all super admins, one per user (concurrent misses share one read).
      cacheBy: ['api_keys'],
      cacheVariant: apiKeyListScopeKey,
    },
    async (ctx, { query }) => {
      const paged = query.page !== undefined || query.limit !== undefined;
      const page = { page: query.page ?? 1, limit: query.limit ?? API_KEY_PAGE_LIMIT };
      const scope = apiKeyListScope(ctx.state.principal);
      if (!scope) {
        ctx.body = paged ? paginatedBody(ctx, [], 0, page) : resource(ctx, []);
        return;
      }
      // Ties broken by id, so pages neither repeat nor skip keys made in the same instant.
      const q = ApiKey.query(ctx.services.db).orderBy([
        { column: 'created_at', order: 'desc' },
        { column: 'id', order: 'desc' },
      ]);
      if ('userId' in scope) q.where('user_id', scope.userId).where('is_system', false);
      ctx.body = paged ? await paginate(ctx, q, page, presentApiKey) : resource(ctx, (await q).map(presentApiKey));
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/api-keys/:id',
      summary: 'Get an API key',
      tags: ['api-keys'],
      auth: { permission: 'api_keys:read' },
      params: idParam,
      responses: {
        200: { description: 'Key', schema: resourceSchema(apiKeySchema) },
        403: { description: 'Not your key' },
        404: { description: 'No such key' },
      },
    },
    async (ctx, { params }) => {
      ctx.body = resource(ctx, presentApiKey(await loadKey(ctx.state.principal, params.id, 'read')));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/api-keys',
      summary: 'Create an API key (the key is shown once)',
      description: 'Scopes must be a subset of your own permissions (super admins exempt), else 403.',
      tags: ['api-keys'],
      auth: { permission: 'api_keys:write' },
      body: z.object({
        name: zChars({ trim: true, min: 1, max: 100 }),
        description: zChars({ max: 2000 }).nullish(),
        scopes: zScopes().default([]),
        expires_at: zFutureDate().nullish(),
      }),
      responses: {
        201: { description: 'Created key with the full key value', schema: issuedApiKeySchema },
        403: { description: 'Scope escalation' },
      },
    },
    async (ctx, { body }) => {
      const p = ctx.state.principal;
      authorizeGrant(p, body.scopes);
      const input = {
        userId: actingUserId(p),
        name: body.name,
        description: body.description ?? null,
        scopes: body.scopes,
        expiresAt: toDate(body.expires_at),
      };
      const { apiKey, key } = await issueApiKey(ctx.services.db, input, requestAttribution(ctx));
      created(ctx, presentIssuedApiKey(apiKey, key), `/v1/api-keys/${apiKey.id}`);
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/api-keys/:id',
      summary: 'Update an API key',
      description:
        'Body {name?, description?, scopes?, is_active?, expires_at?}; new scopes must be a subset of your own permissions; ' +
        'switching a key back on, or moving its expiry later or removing it, needs everything the key confers.',
      tags: ['api-keys'],
      auth: { permission: 'api_keys:write' },
      params: idParam,
      body: z.object({
        name: zChars({ trim: true, min: 1, max: 100 }).optional(),
        description: zChars({ max: 2000 }).nullish(),
        scopes: zScopes().optional(),
        is_active: z.boolean().optional(),
        expires_at: zFutureDate().nullish(),
      }),
      responses: {
        200: { description: 'Updated key', schema: resourceSchema(apiKeySchema) },
        403: {
          description:
            'Not your key, scope escalation, reactivating a key an administrator switched off, switching a key ' +
            'back on or extending its expiry without holding everything it confers, or changing the scopes, ' +
            'is_active or expires_at of a system key',
        },
        404: { description: 'No such key' },
        409: { description: 'Extending an expired key' },
      },
    },
    async (ctx, { params, body }) => {
      const p = ctx.state.principal;
      const key = await loadKey(p, params.id, 'update');
      if (body.scopes !== undefined || body.is_active !== undefined || body.expires_at !== undefined)
        authorize(p, 'changeGrant', subjects.apiKey(key));
      if (body.scopes) authorizeGrant(p, body.scopes);
      const expiresAt = body.expires_at === undefined ? undefined : toDate(body.expires_at);
      const reactivating = body.is_active === true && !key.is_active;
      // Also run on the key as the update locks it: a switch-off committed meanwhile counts.
      const checkReactivation = (current: ApiKey) => {
        if (body.is_active === true && !current.is_active) authorize(p, 'reactivate', subjects.apiKey(current));
      };
      if (reactivating) checkReactivation(key);
      if (reactivating || (expiresAt !== undefined && extendsKeyLife(key.expires_at, expiresAt)))
        await authorizeTakeover(ctx, p, key);
      // Whoever may switch a locked key back on locks it by switching it off (an administrator).
      const locking = can(
        p,
        'reactivate',
        subjects.apiKey({ user_id: key.user_id, is_system: key.is_system, locked: true }),
      );
      const changes: ApiKeyChanges = {
        name: body.name,
        description: body.description,
        scopes: body.scopes,
        is_active: body.is_active,
        expires_at: expiresAt,
      };
      // Every field is optional (decisions: PATCH /v1/api-keys/{id}); nothing named, nothing changes.
      const updated = emptyPatch(body)
        ? key
        : await updateApiKey(
            ctx.services,
            key,
            changes,
            { locking, recheck: checkReactivation },
            requestAttribution(ctx),
          );
      ctx.body = resource(ctx, presentApiKey(updated));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/api-keys/:id/regenerate',
      summary: 'Regenerate an API key (the old key is invalid at once)',
      description:
        "System keys are regenerable only by super admins. The caller must hold everything the key confers (its scopes and its roles' permissions, as far as its owner holds them), as if issuing it.",
      tags: ['api-keys'],
      auth: { permission: 'api_keys:write' },
      params: idParam,
      responses: {
        200: { description: 'The new key, shown once', schema: issuedApiKeySchema },
        403: { description: 'Not your key' },
        404: { description: 'No such key' },
      },
    },
    async (ctx, { params }) => {
      const old = await loadKey(ctx.state.principal, params.id, 'regenerate');
      await authorizeTakeover(ctx, ctx.state.principal, old);
      const { apiKey, key } = await regenerateApiKey(ctx.services, old, requestAttribution(ctx));
      ctx.body = presentIssuedApiKey(apiKey, key);
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/api-keys/:id',
      summary: 'Delete an API key (system keys cannot be deleted)',
      tags: ['api-keys'],
      auth: { permission: 'api_keys:delete' },
      params: idParam,
      responses: {
        204: { description: 'Deleted' },
        403: { description: 'System key, or not your key' },
        404: { description: 'No such key' },
      },
    },
    async (ctx, { params }) => {
      const key = await loadKey(ctx.state.principal, params.id, 'delete');
      await deleteApiKey(ctx.services, key, requestAttribution(ctx));
      noContent(ctx);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/api-keys/:id/roles',
      summary: "List an API key's roles",
      tags: ['api-keys'],
      auth: { permission: 'api_keys:read' },
      params: idParam,
      responses: { 200: { description: 'Roles', schema: keyRolesBody }, 404: { description: 'No such key' } },
    },
    async (ctx, { params }) => {
      // The key (access, 404) and its roles in the same turn's batches; the roles are shown only if allowed.
      const [, roles] = await Promise.all([
        loadKey(ctx.state.principal, params.id, 'read'),
        apiKeyRoles(ctx.services.db, params.id),
      ]);
      ctx.body = resource(ctx, roles.map(presentRole));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/api-keys/:id/roles',
      summary: 'Assign a role to an API key',
      description:
        "You may assign only roles you hold yourself (super admins any). Answers with the key's roles after the change.",
      tags: ['api-keys'],
      auth: { permission: 'api_keys:write' },
      params: idParam,
      body: z.object({ role_id: zChars({ min: 1, max: 64 }) }),
      responses: {
        201: { description: 'Current roles of the key', schema: keyRolesBody },
        400: { description: 'Invalid input, or no such role (`role_id: no such role`)' },
        403: { description: 'Role escalation' },
        404: { description: 'No such key' },
        409: { description: 'Already assigned' },
      },
    },
    async (ctx, { params, body }) => {
      const p = ctx.state.principal;
      const key = await loadKey(p, params.id, 'update');
      const role = await findReferenced(Role, body.role_id, 'role_id', 'role');
      authorize(p, 'assignToKey', subjects.role(role, await ctx.services.credentials.access.role(role.id)));
      await assignApiKeyRole(ctx.services, key, role);
      created(ctx, resource(ctx, (await apiKeyRoles(ctx.services.db, key.id)).map(presentRole)));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/api-keys/:id/roles/:role_id',
      summary: 'Remove a role from an API key',
      tags: ['api-keys'],
      auth: { permission: 'api_keys:write' },
      params: z.object({ id: zUuid(), role_id: zChars({ min: 1, max: 64 }) }),
      responses: { 204: { description: 'Removed' }, 404: { description: 'No such key, or the role is not assigned' } },
    },
    async (ctx, { params }) => {
      const key = await loadKey(ctx.state.principal, params.id, 'update');
      await removeApiKeyRole(ctx.services, key, params.role_id);
      noContent(ctx);
    },
  );
}
