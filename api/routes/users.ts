import Router from '@koa/router';
import { loadUserAccess, rolePermissionSet } from '../../shared/queries/access';
import { supportedLocales } from '../../shared/queries/accountSettings';
import { oauthSignin, oauthSigninSchema } from '../../shared/commands/oauthSignin';
import { recordAuditEvent } from '../../shared/audit';
import { cancelDeletion, scheduleDeletion, softDeleteUser } from '../../shared/commands/userLifecycle';
import { announceUserAccessChanged, userRoles } from '../../shared/commands/userRoles';
import { normaliseEmail, zUsername } from '../../shared/domain/accounts';
import { emailInUse, findUserIdByEmail, flatUser, userAccounts, usernameTaken } from '../../shared/queries/users';
import { badRequest, conflict, forbidden, notFound } from '../../shared/errors';
import { PlatformAccount } from '../../shared/models/PlatformAccount';
import { Role } from '../../shared/models/Role';
import { User } from '../../shared/models/User';
import { ACCOUNT_SCOPES, actingUserId, authorizeRoleGrant, authorizeSelf, can, requireAuthenticated } from '../../shared/policies';
import { displayAccount, presentProfile, presentUser } from '../../shared/presenters/user';
import { atLeastOne, z, zHttpUrl, zQueryBool } from '../../shared/zod';
import { paginate, paginationQuery } from '../pagination';
import { defineRoute, AppContext, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';
import { loadUser, requireActingUser, resolveUserRef, userIdParam, zUserRef } from '../params';
import { rowById } from '../../shared/rowLoader';
import { created, noContent, resource } from '../responses';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['users'];
const self = (permission: string) => ({ permission, self: 'id' });
/** A write to a user: self, or a manager holding every permission the user holds. */
const manage = (permission: string) => ({ permission, self: 'id', manages: 'id' });
const userPath = (id: string) => `/v1/users/${id}`;

/** Giving or taking a role needs every permission it grants (shared/policies decides). */
async function assertMayManageRole(ctx: AppContext, roleId: string): Promise<void> {
  authorizeRoleGrant(ctx.state.principal, { id: roleId, permissions: await rolePermissionSet(ctx.services.db, roleId) });
}

async function presentRoles(ctx: AppContext, userId: string) {
  return (await userRoles(ctx.services.db, userId)).map((r: Role) => ({ id: r.id, name: r.name, description: r.description }));
}

/** Users (spec §4.11): me, list, get, profile, updates, soft delete, provider sign-in, roles. */
export function userRoutes(router: ApiRouter): void {
  // --- /v1/users/me: registered before /v1/users/:id so `me` never reaches the id routes.
  defineRoute(router, { method: 'get', path: '/v1/users/me', summary: 'The calling user', description: 'Works for user credentials and for user-owned API keys (acting as the owner): who the credential acts for.', tags: TAG, auth: 'authenticated' }, async (ctx) => {
    const id = requireActingUser(ctx.state.principal);
    ctx.body = resource(ctx, presentUser(await loadUser(ctx.services.db, id)), userPath(id));
  });

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/users/me',
      summary: 'Ask for the deletion of the own account',
      description: 'Schedules the deletion after the grace period (7 days); the account stays usable until then and the deletion can be cancelled.',
      tags: TAG,
      auth: { account: ACCOUNT_SCOPES.delete },
      responses: { 200: { description: '{success, message, scheduled_deletion_at}' } },
    },
    async (ctx) => {
      const id = requireActingUser(ctx.state.principal);
      const at = await scheduleDeletion(ctx.services, id, requestAttribution(ctx));
      ctx.body = { success: true, message: `your account will be deleted on ${at.toISOString()}`, scheduled_deletion_at: at.toISOString() };
    },
  );

  defineRoute(
    router,
    { method: 'post', path: '/v1/users/me/cancel-deletion', summary: 'Cancel the scheduled deletion of the own account', tags: TAG, auth: { account: ACCOUNT_SCOPES.delete }, responses: { 200: { description: '{success, message}' }, 409: { description: 'No deletion scheduled' } } },
    async (ctx) => {
      const id = requireActingUser(ctx.state.principal);
      await cancelDeletion(ctx.services, id, requestAttribution(ctx));
      ctx.body = { success: true, message: 'the scheduled deletion of your account was cancelled' };
    },
  );

  // --- collection and system routes
  defineRoute(
    router,
    { method: 'get', path: '/v1/users', summary: 'List users', tags: TAG, auth: { permission: 'users:read' }, query: paginationQuery(20).extend({ include_deleted: zQueryBool().optional() }) },
    async (ctx, { query }) => {
      const q = User.query(ctx.services.db).orderBy('created_at', 'asc').orderBy('id');
      if (!query.include_deleted) q.whereNull('deleted_at');
      ctx.body = await paginate(ctx, q, query, presentUser);
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/oauth',
      summary: 'Create or update a user from a provider sign-in (system key only)',
      description: 'Links the provider account to an existing user with the same (verified) email. Any other caller gets 401.',
      tags: TAG,
      auth: 'system',
      body: oauthSigninSchema,
      responses: { 200: { description: '{data: flattened user}' }, 400: { description: 'Unknown platform' }, 401: { description: 'Not the system key' }, 403: { description: 'Platform disabled' } },
    },
    async (ctx, { body }) => {
      const r = await oauthSignin(
        ctx.services,
        { email: body.email ?? null, name: body.name, oauthProvider: body.oauthProvider, oauthProviderId: body.oauthProviderId, image: body.image ?? null },
        { ipAddress: ctx.ip, userAgent: ctx.get('user-agent') || null },
      );
      ctx.body = { data: r.user, _links: { self: userPath(r.user.id) } };
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/email/:email',
      summary: 'Find a user by email',
      description: 'The system key (and holders of users:read) may look up any address; other callers only their own (403 otherwise).',
      tags: TAG,
      auth: 'authenticated',
      params: z.object({ email: z.string().trim().max(320).email({ message: 'must be an email address' }).transform(normaliseEmail) }),
      responses: { 200: { description: '{data: flattened user}' }, 401: { description: 'No credentials' }, 403: { description: "Another user's address" }, 404: { description: 'Not found' } },
    },
    async (ctx, { params }) => {
      const p = ctx.state.principal;
      requireAuthenticated(p);
      const db = ctx.services.db;
      let userId: string | undefined;
      if (p.kind === 'system' || can(p, 'users:read')) {
        userId = await findUserIdByEmail(db, params.email);
      } else {
        const own = authorizeSelf(p, 'users:read');
        const mine = own ? await db('platform_accounts').where('user_id', own).whereRaw('lower(email) = ?', [params.email]).first('id') : undefined;
        // Decided before any lookup of other users, so the answer says nothing about them.
        if (!mine) throw forbidden('you may only look up your own email address');
        userId = (await User.query(db).findById(own!).whereNull('deleted_at')) ? own! : undefined;
      }
      if (!userId) throw notFound('user');
      ctx.body = { data: await flatUser(db, userId), _links: { self: userPath(userId) } };
    },
  );

  // --- single user
  defineRoute(router, { method: 'get', path: '/v1/users/:id', summary: 'Get a user', tags: TAG, auth: self('users:read'), params: userIdParam }, async (ctx, { params }) => {
    const id = resolveUserRef(ctx, params.id);
    ctx.body = resource(ctx, presentUser(await loadUser(ctx.services.db, id, { includeDeleted: true })), userPath(id));
  });

  defineRoute(
    router,
    { method: 'get', path: '/v1/users/:id/profile', summary: "A user's profile (unwrapped)", tags: TAG, auth: self('users:read'), params: userIdParam },
    async (ctx, { params }) => {
      const db = ctx.services.db;
      const id = resolveUserRef(ctx, params.id);
      const user = await loadUser(db, id, { includeDeleted: true });
      const [accounts, last] = await Promise.all([
        userAccounts(db, id),
        db('sessions').where('user_id', id).whereNotNull('platform_slug').orderBy('created_at', 'desc').first('platform_slug'),
      ]);
      ctx.body = presentProfile(user, accounts, last?.platform_slug ?? null);
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/users/:id',
      summary: 'Update a user',
      description:
        'username, email, avatar_url (both on the primary platform account), privacy_mode, avatars_enabled. avatars_enabled=false removes every avatar URL of the user and keeps later sign-ins from filling them. The sign-in address of an email account changes only through /email/request-change.',
      tags: TAG,
      auth: manage('users:write'),
      params: userIdParam,
      body: atLeastOne(
        z.object({
          username: zUsername().optional(),
          email: z.string().trim().max(320).email({ message: 'must be an email address' }).transform(normaliseEmail).optional(),
          avatar_url: zHttpUrl().nullable().optional(),
          privacy_mode: z.boolean().optional(),
          avatars_enabled: z.boolean().optional(),
        }),
      ),
      responses: { 200: { description: 'ResourceResponse<User>' }, 409: { description: 'Username or email taken' } },
    },
    async (ctx, { params, body }) => {
      const db = ctx.services.db;
      const id = resolveUserRef(ctx, params.id);
      const actor = requestAttribution(ctx);
      const user = await db.transaction(async (trx) => {
        const user = await loadUser(trx, id, { forUpdate: true });
        const changes: Partial<User> = {};
        if (body.username !== undefined && body.username !== user.username) {
          if (await usernameTaken(trx, body.username, id)) throw conflict('username is already taken');
          changes.username = body.username;
        }
        if (body.privacy_mode !== undefined) changes.privacy_mode = body.privacy_mode;
        if (body.avatars_enabled !== undefined) changes.avatars_enabled = body.avatars_enabled;
        const avatarsOn = changes.avatars_enabled ?? user.avatars_enabled;

        if (body.email !== undefined || body.avatar_url !== undefined) {
          const accounts = await userAccounts(trx, id);
          const primary = displayAccount(accounts, user.primary_platform_account_id);
          if (!primary) throw badRequest('the user has no platform account to update');
          const accountChanges: Partial<PlatformAccount> = {};
          if (body.email !== undefined && body.email !== primary.email) {
            if (primary.platform?.slug === 'email') throw badRequest('email: the sign-in address of an email account changes through POST /v1/users/{id}/email/request-change');
            if (await emailInUse(trx, body.email, id)) throw conflict('email is already in use');
            // Typed in, not proven: it never becomes a basis for linking by email until a provider confirms it.
            Object.assign(accountChanges, { email: body.email, email_verified_at: null });
          }
          if (body.avatar_url !== undefined) {
            if (body.avatar_url !== null && !avatarsOn) throw badRequest('avatar_url: avatars are disabled for this user');
            accountChanges.avatar_url = body.avatar_url;
          }
          if (Object.keys(accountChanges).length) await PlatformAccount.query(trx).patch(accountChanges).where('id', primary.id);
        }
        if (changes.avatars_enabled === false) await PlatformAccount.query(trx).patch({ avatar_url: null }).where('user_id', id);
        // Always patched (even with account-only changes) so updated_at moves.
        const updated = await User.query(trx).patchAndFetchById(id, changes);
        await recordAuditEvent(
          { user_id: id, event_type: 'user_updated', resource_type: 'user', resource_id: id, actor_id: actor.actorId, ip_address: actor.ipAddress, user_agent: actor.userAgent, metadata: { fields: Object.keys(body).filter((k) => (body as Record<string, unknown>)[k] !== undefined) } },
          trx,
        );
        return updated;
      });
      ctx.body = resource(ctx, presentUser(user), userPath(id));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/users/:id/locale',
      summary: "Set or clear a user's preferred locale",
      description: 'Supported locales are configurable (system config auth.supported_locales; default en and de). null clears.',
      tags: TAG,
      auth: manage('users:write'),
      params: userIdParam,
      body: z.object({ locale: z.string({ required_error: 'is required (null clears)', invalid_type_error: 'must be a string or null' }).trim().toLowerCase().nullable() }),
    },
    async (ctx, { params, body }) => {
      const db = ctx.services.db;
      const id = resolveUserRef(ctx, params.id);
      await loadUser(db, id);
      if (body.locale !== null) {
        const allowed = (await supportedLocales(db, ctx.services.config)).map((l) => l.toLowerCase());
        if (!allowed.includes(body.locale)) throw badRequest(`locale: must be one of ${allowed.join(', ')} or null`);
      }
      const user = await User.query(db).patchAndFetchById(id, { preferred_locale: body.locale });
      ctx.body = resource(ctx, presentUser(user), userPath(id));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/users/:id/username',
      summary: "Change a user's username",
      description: '3-30 characters of letters, digits and underscore; unique case-insensitively.',
      tags: TAG,
      auth: manage('users:write'),
      params: userIdParam,
      body: z.object({ username: zUsername() }),
      responses: { 200: { description: 'ResourceResponse<User>' }, 400: { description: 'Invalid username' }, 404: { description: 'No such user' }, 409: { description: 'Username taken' } },
    },
    async (ctx, { params, body }) => {
      const db = ctx.services.db;
      const id = resolveUserRef(ctx, params.id);
      const actor = requestAttribution(ctx);
      const user = await db.transaction(async (trx) => {
        const current = await loadUser(trx, id);
        if (await usernameTaken(trx, body.username, id)) throw conflict('username is already taken');
        const updated = await User.query(trx).patchAndFetchById(id, { username: body.username });
        await recordAuditEvent({ user_id: id, event_type: 'user_updated', resource_type: 'user', resource_id: id, actor_id: actor.actorId, ip_address: actor.ipAddress, user_agent: actor.userAgent, metadata: { fields: ['username'], previous_username: current.username } }, trx);
        return updated;
      });
      ctx.body = resource(ctx, presentUser(user), userPath(id));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/users/:id',
      summary: 'Soft-delete a user',
      description: 'Sets deleted_at, revokes every session and API key at once and schedules the purge after the grace period (cancel-deletion restores the account).',
      tags: TAG,
      auth: { permission: 'users:delete', manages: 'id' },
      params: userIdParam,
      responses: { 204: { description: 'Deleted' }, 404: { description: 'No such user' }, 409: { description: 'Already deleted' } },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await softDeleteUser(ctx.services, id, { ...requestAttribution(ctx), reason: 'deleted by an administrator' });
      noContent(ctx);
    },
  );

  // --- access of a user
  defineRoute(
    router,
    { method: 'get', path: '/v1/users/:id/permissions', summary: "A user's effective permissions (role-based included)", tags: TAG, auth: self('users:read'), params: userIdParam },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await loadUser(ctx.services.db, id, { includeDeleted: true });
      ctx.body = { permissions: (await loadUserAccess(ctx.services.db, id)).permissions };
    },
  );

  defineRoute(router, { method: 'get', path: '/v1/users/:id/roles', summary: "A user's roles", tags: TAG, auth: self('users:read'), params: userIdParam }, async (ctx, { params }) => {
    const id = resolveUserRef(ctx, params.id);
    await loadUser(ctx.services.db, id, { includeDeleted: true });
    ctx.body = { roles: await presentRoles(ctx, id) };
  });

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/:id/roles',
      summary: 'Assign a role to a user',
      description: 'Answers 201 with the current list. A caller who is not a super admin may only assign roles whose permissions they hold.',
      tags: TAG,
      auth: { permission: 'users:write', manages: 'id' },
      params: userIdParam,
      body: z.object({ role_id: z.string().min(1).max(64) }),
      responses: { 201: { description: '{data: [roles]}' }, 404: { description: 'No such user or role' }, 409: { description: 'Already assigned' } },
    },
    async (ctx, { params, body }) => {
      const db = ctx.services.db;
      const id = resolveUserRef(ctx, params.id);
      await loadUser(db, id);
      const role = await rowById(Role).load(body.role_id);
      if (!role) throw notFound('role');
      await assertMayManageRole(ctx, role.id);
      const actor = requestAttribution(ctx);
      await db.transaction(async (trx) => {
        const inserted = await trx('user_roles').insert({ user_id: id, role_id: role.id }).onConflict(['user_id', 'role_id']).ignore().returning('role_id');
        if (!inserted.length) throw conflict('the user already has this role');
        await recordAuditEvent({ user_id: id, event_type: 'user_updated', resource_type: 'user', resource_id: id, actor_id: actor.actorId, ip_address: actor.ipAddress, user_agent: actor.userAgent, metadata: { action: 'role_assigned', role_id: role.id } }, trx);
      });
      await announceUserAccessChanged(ctx.services, id);
      created(ctx, { data: await presentRoles(ctx, id), _links: { self: `${userPath(id)}/roles` } });
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
      params: z.object({ id: zUserRef(), role_id: z.string().min(1).max(64) }),
      responses: { 204: { description: 'Removed' }, 404: { description: 'No such user, or role not assigned' } },
    },
    async (ctx, { params }) => {
      const db = ctx.services.db;
      const id = resolveUserRef(ctx, params.id);
      await loadUser(db, id, { includeDeleted: true });
      const assigned = await db('user_roles').where({ user_id: id, role_id: params.role_id }).first('role_id');
      if (!assigned) throw notFound('role assignment');
      await assertMayManageRole(ctx, params.role_id);
      const actor = requestAttribution(ctx);
      await db.transaction(async (trx) => {
        await trx('user_roles').where({ user_id: id, role_id: params.role_id }).delete();
        await recordAuditEvent({ user_id: id, event_type: 'user_updated', resource_type: 'user', resource_id: id, actor_id: actor.actorId, ip_address: actor.ipAddress, user_agent: actor.userAgent, metadata: { action: 'role_removed', role_id: params.role_id } }, trx);
      });
      await announceUserAccessChanged(ctx.services, id);
      noContent(ctx);
    },
  );
}
