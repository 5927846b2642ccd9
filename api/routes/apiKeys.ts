import Router from '@koa/router';
import { invalidateCredentials } from '../../shared/commands/accessChanges';
import { rolePermissionSet } from '../../shared/queries/access';
import { createApiKey, regenerateApiKey } from '../../shared/commands/apiKeys';
import { recordAuditEvent } from '../../shared/audit';
import { conflict, forbidden, notFound } from '../../shared/errors';
import { ApiKey } from '../../shared/models/ApiKey';
import { Role } from '../../shared/models/Role';
import { actingUserId, authorizeGrant, authorizeOwner, authorizeRoleGrant, isSuperAdmin, Principal, requireSuperAdmin } from '../../shared/policies';
import { presentApiKey, presentIssuedApiKey } from '../../shared/presenters/apiKey';
import { presentRole } from '../../shared/presenters/role';
import { atLeastOne, z, zUuid } from '../../shared/zod';
import { AppContext, AppState, defineRoute } from '../routing';
import type { ApiServices } from '../services';
import { rowById } from '../../shared/rowLoader';
import { created, noContent, resource } from '../responses';

/** A permission string as a scope: `resource:action`, either side may be the wildcard `*`. */
export const zScope = () => z.string().regex(/^([a-z][a-z0-9_]*|\*):([a-z][a-z0-9_.]*|\*)$/, 'must be resource:action');
const zScopes = () => z.array(zScope()).max(200).transform((s) => [...new Set(s)]);
const zFutureDate = () =>
  z
    .string()
    .datetime({ offset: true, message: 'must be an ISO 8601 date-time' })
    .refine((v) => new Date(v).getTime() > Date.now(), 'must be in the future');

const idParam = z.object({ id: zUuid() });
const keySchema = z.object({
  id: z.string().uuid(),
  user_id: z.string().uuid().nullable(),
  key_prefix: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  scopes: z.array(z.string()),
  is_active: z.boolean(),
  is_system: z.boolean(),
  expires_at: z.string().nullable(),
  last_used_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
const issuedSchema = z.object({
  id: z.string().uuid(),
  key: z.string().describe('the full key; shown only in this response'),
  key_prefix: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  scopes: z.array(z.string()),
  is_active: z.boolean(),
  expires_at: z.string().nullable(),
  created_at: z.string(),
});
const links = z.object({ self: z.string() });

/** Owner of the key, or a super admin; system keys belong to super admins only. */
function authorizeKey(p: Principal, key: ApiKey): void {
  if (key.is_system) return requireSuperAdmin(p, 'system keys are managed by super admins only');
  if (isSuperAdmin(p)) return;
  authorizeOwner(p, key.user_id, '*:*');
}

async function loadKey(ctx: AppContext, id: string): Promise<ApiKey> {
  const key = await rowById(ApiKey).load(id);
  if (!key) throw notFound('api key');
  authorizeKey(ctx.state.principal, key);
  return key;
}

async function keyRoles(keyId: string): Promise<Role[]> {
  return Role.query().join('api_key_roles as kr', 'kr.role_id', 'roles.id').where('kr.api_key_id', keyId).orderBy('roles.name').select('roles.*');
}

function auditBase(ctx: AppContext, key: ApiKey) {
  const actor = actingUserId(ctx.state.principal);
  return {
    user_id: key.user_id ?? actor,
    actor_id: actor,
    resource_type: 'api_key',
    resource_id: key.id,
    ip_address: ctx.ip,
    user_agent: ctx.get('user-agent') || null,
  };
}

/** API keys (spec §4.20): key shown once, stored as a hash, no scope or role escalation. */
export function apiKeyRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/api-keys',
      summary: "List API keys (the caller's own; super admins see all)",
      tags: ['api-keys'],
      auth: { permission: 'api_keys:read' },
      responses: { 200: { description: 'Keys without key material', schema: z.object({ data: z.array(keySchema), _links: links }) } },
    },
    async (ctx) => {
      const p = ctx.state.principal;
      const q = ApiKey.query().orderBy('created_at', 'desc');
      if (!isSuperAdmin(p)) {
        const uid = actingUserId(p);
        if (!uid) {
          ctx.body = resource(ctx, []);
          return;
        }
        q.where('user_id', uid).where('is_system', false);
      }
      ctx.body = resource(ctx, (await q).map(presentApiKey));
    },
  );

  defineRoute(
    router,
    { method: 'get', path: '/v1/api-keys/:id', summary: 'Get an API key', tags: ['api-keys'], auth: { permission: 'api_keys:read' }, params: idParam, responses: { 200: { description: 'Key', schema: z.object({ data: keySchema, _links: links }) }, 403: { description: 'Not your key' }, 404: { description: 'No such key' } } },
    async (ctx, { params }) => {
      ctx.body = resource(ctx, presentApiKey(await loadKey(ctx, params.id)));
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
        name: z.string().trim().min(1).max(100),
        description: z.string().max(2000).nullish(),
        scopes: zScopes().default([]),
        expires_at: zFutureDate().nullish(),
      }),
      responses: { 201: { description: 'Created key with the full key value', schema: issuedSchema }, 403: { description: 'Scope escalation' } },
    },
    async (ctx, { body }) => {
      const p = ctx.state.principal;
      authorizeGrant(p, body.scopes);
      const { apiKey, key } = await ctx.services.db.transaction(async (trx) => {
        const made = await createApiKey({ userId: actingUserId(p), name: body.name, description: body.description ?? null, scopes: body.scopes, expiresAt: body.expires_at ? new Date(body.expires_at) : null }, trx);
        await recordAuditEvent({ ...auditBase(ctx, made.apiKey), event_type: 'api_key_created', metadata: { name: made.apiKey.name, key_prefix: made.apiKey.key_prefix, scopes: made.apiKey.scopes } }, trx);
        return made;
      });
      ctx.set('Location', `/v1/api-keys/${apiKey.id}`);
      created(ctx, presentIssuedApiKey(apiKey, key));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/api-keys/:id',
      summary: 'Update an API key',
      description: 'Body {name?, description?, scopes?, is_active?, expires_at?}; new scopes must be a subset of your own permissions.',
      tags: ['api-keys'],
      auth: { permission: 'api_keys:write' },
      params: idParam,
      body: atLeastOne(
        z.object({
          name: z.string().trim().min(1).max(100).optional(),
          description: z.string().max(2000).nullish(),
          scopes: zScopes().optional(),
          is_active: z.boolean().optional(),
          expires_at: zFutureDate().nullish(),
        }),
      ),
      responses: {
        200: { description: 'Updated key', schema: z.object({ data: keySchema, _links: links }) },
        403: { description: 'Not your key, scope escalation, or reactivating a key an administrator switched off' },
        404: { description: 'No such key' },
        409: { description: 'Extending an expired key' },
      },
    },
    async (ctx, { params, body }) => {
      const key = await loadKey(ctx, params.id);
      const p = ctx.state.principal;
      if (body.scopes) authorizeGrant(p, body.scopes);
      const byOwner = key.user_id !== null && actingUserId(p) === key.user_id;
      // An administrator's switch-off (or the account's deletion) sticks: the owner cannot undo it.
      if (body.is_active === true && !key.is_active && key.locked && byOwner) {
        throw forbidden('is_active: this key was switched off by an administrator or by the deletion of the account; only an administrator can switch it back on');
      }
      // An expired key stays dead; moving its expiry would revive a credential that may have leaked.
      if (body.expires_at !== undefined && key.expires_at && key.expires_at.getTime() <= Date.now()) {
        throw conflict('expires_at: this key has expired and cannot be extended; create a new key');
      }
      const patch: Partial<ApiKey> = {};
      if (body.name !== undefined) patch.name = body.name;
      if (body.description !== undefined) patch.description = body.description;
      if (body.scopes !== undefined) patch.scopes = body.scopes;
      if (body.is_active !== undefined) {
        patch.is_active = body.is_active;
        if (!byOwner) patch.locked = !body.is_active;
      }
      if (body.expires_at !== undefined) patch.expires_at = body.expires_at ? new Date(body.expires_at) : null;
      const updated = await ctx.services.db.transaction(async (trx) => {
        const row = await ApiKey.query(trx).patchAndFetchById(key.id, patch);
        if (key.is_active && body.is_active === false) {
          await recordAuditEvent({ ...auditBase(ctx, key), event_type: 'api_key_revoked', metadata: { key_prefix: key.key_prefix, reason: 'deactivated' } }, trx);
        }
        return row;
      });
      await invalidateCredentials(ctx.services, { apiKeyId: key.id });
      ctx.body = resource(ctx, presentApiKey(updated));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/api-keys/:id/regenerate',
      summary: 'Regenerate an API key (the old key is invalid at once)',
      description: 'System keys are regenerable only by super admins.',
      tags: ['api-keys'],
      auth: { permission: 'api_keys:write' },
      params: idParam,
      responses: { 200: { description: 'The new key, shown once', schema: issuedSchema }, 403: { description: 'Not your key' }, 404: { description: 'No such key' } },
    },
    async (ctx, { params }) => {
      const old = await loadKey(ctx, params.id);
      const { apiKey, key } = await ctx.services.db.transaction(async (trx) => {
        const made = await regenerateApiKey(old.id, trx);
        await recordAuditEvent({ ...auditBase(ctx, old), event_type: 'api_key_revoked', metadata: { key_prefix: old.key_prefix, reason: 'regenerated' } }, trx);
        await recordAuditEvent({ ...auditBase(ctx, old), event_type: 'api_key_created', metadata: { key_prefix: made.apiKey.key_prefix, regenerated: true, scopes: made.apiKey.scopes } }, trx);
        return made;
      });
      await invalidateCredentials(ctx.services, { apiKeyId: old.id });
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
      responses: { 204: { description: 'Deleted' }, 403: { description: 'System key, or not your key' }, 404: { description: 'No such key' } },
    },
    async (ctx, { params }) => {
      const found = await rowById(ApiKey).load(params.id);
      if (!found) throw notFound('api key');
      if (found.is_system) throw forbidden('system keys cannot be deleted');
      const key = await loadKey(ctx, params.id);
      await ctx.services.db.transaction(async (trx) => {
        await ApiKey.query(trx).deleteById(key.id);
        await recordAuditEvent({ ...auditBase(ctx, key), event_type: 'api_key_revoked', metadata: { key_prefix: key.key_prefix, name: key.name, reason: 'deleted' } }, trx);
      });
      await invalidateCredentials(ctx.services, { apiKeyId: key.id });
      noContent(ctx);
    },
  );

  const rolesBody = z.object({ data: z.array(z.object({ id: z.string(), name: z.string(), description: z.string().nullable(), is_system: z.boolean(), requires_two_factor: z.boolean(), created_at: z.string(), updated_at: z.string() })), _links: links });

  defineRoute(
    router,
    { method: 'get', path: '/v1/api-keys/:id/roles', summary: "List an API key's roles", tags: ['api-keys'], auth: { permission: 'api_keys:read' }, params: idParam, responses: { 200: { description: 'Roles', schema: rolesBody }, 404: { description: 'No such key' } } },
    async (ctx, { params }) => {
      const key = await loadKey(ctx, params.id);
      ctx.body = resource(ctx, (await keyRoles(key.id)).map(presentRole));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/api-keys/:id/roles',
      summary: 'Assign a role to an API key',
      description: 'You may assign only roles you hold yourself (super admins any). Answers with the key\'s roles after the change.',
      tags: ['api-keys'],
      auth: { permission: 'api_keys:write' },
      params: idParam,
      body: z.object({ role_id: z.string().min(1).max(64) }),
      responses: { 201: { description: 'Current roles of the key', schema: rolesBody }, 403: { description: 'Role escalation' }, 404: { description: 'No such key or role' }, 409: { description: 'Already assigned' } },
    },
    async (ctx, { params, body }) => {
      const key = await loadKey(ctx, params.id);
      const role = await rowById(Role).load(body.role_id);
      if (!role) throw notFound('role');
      authorizeRoleGrant(ctx.state.principal, { id: role.id, permissions: await rolePermissionSet(ctx.services.db, role.id) }, { mustHoldRole: true });
      if (await ctx.services.db('api_key_roles').where({ api_key_id: key.id, role_id: role.id }).first()) throw conflict('role already assigned to this key');
      await ctx.services.db('api_key_roles').insert({ api_key_id: key.id, role_id: role.id });
      await invalidateCredentials(ctx.services, { apiKeyId: key.id });
      created(ctx, resource(ctx, (await keyRoles(key.id)).map(presentRole)));
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
      params: z.object({ id: zUuid(), role_id: z.string().min(1).max(64) }),
      responses: { 204: { description: 'Removed' }, 404: { description: 'No such key, or the role is not assigned' } },
    },
    async (ctx, { params }) => {
      const key = await loadKey(ctx, params.id);
      const n = await ctx.services.db('api_key_roles').where({ api_key_id: key.id, role_id: params.role_id }).delete();
      if (!n) throw notFound('api key role');
      await invalidateCredentials(ctx.services, { apiKeyId: key.id });
      noContent(ctx);
    },
  );
}
