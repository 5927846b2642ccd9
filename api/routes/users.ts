import Router from '@koa/router';
import { cancelDeletion, scheduleDeletion, softDeleteUser } from '../../shared/commands/userLifecycle';
import { changeUsername, setPreferredLocale, updateUser } from '../../shared/commands/users';
import { zEmail, zUsername } from '../../shared/domain/accounts';
import { notFound } from '../../shared/errors';
import { User } from '../../shared/models/User';
import { ACCOUNT_SCOPES } from '../../shared/policies';
import { presentProfile, presentUser, profileSchema, userSchema } from '../../shared/presenters/user';
import { userView } from '../../shared/queries/users';
import { emptyPatch, z, zHttpUrl, zQueryBool } from '../../shared/zod';
import { paginate, paginationQuery } from '../pagination';
import { loadUser, requireActingUser, resolveUserRef, userIdParam } from '../params';
import { noContent, pageSchema, resource, resourceSchema, successSchema } from '../responses';
import { defineRoute, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';
import { userLookupRoutes } from './userLookup';
import { userRoleRoutes } from './userRoles';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['users'];
const self = (permission: string) => ({ permission, self: 'id' });
/** A write to a user: self, or a manager holding every permission the user holds. */
const manage = (permission: string) => ({ permission, self: 'id', manages: 'id' });
const userPath = (id: string) => `/v1/users/${id}`;
const userResponse = { description: 'ResourceResponse<User>', schema: resourceSchema(userSchema) };

/** Users (spec §4.11): me, list, get, profile, updates, soft delete; lookups and roles in their own files. */
export function userRoutes(router: ApiRouter): void {
  // --- /v1/users/me: registered before /v1/users/:id so `me` never reaches the id routes.
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/me',
      summary: 'The calling user',
      description:
        'Works for user credentials and for user-owned API keys (acting as the owner): who the credential acts for.',
      tags: TAG,
      auth: 'authenticated',
      responses: { 200: userResponse },
    },
    async (ctx) => {
      const id = requireActingUser(ctx.state.principal);
      ctx.body = resource(ctx, presentUser(await loadUser(ctx.services.db, id)), userPath(id));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/users/me',
      summary: 'Ask for the deletion of the own account',
      description:
        'Schedules the deletion after the grace period (7 days); the account stays usable until then and the deletion can be cancelled.',
      tags: TAG,
      auth: { account: ACCOUNT_SCOPES.delete },
      responses: {
        200: {
          description: '{success, message, scheduled_deletion_at}',
          schema: successSchema.extend({ scheduled_deletion_at: z.string().datetime() }),
        },
        409: { description: 'The caller is the last administrator (docs/access-control.md)' },
      },
    },
    async (ctx) => {
      const id = requireActingUser(ctx.state.principal);
      const at = await scheduleDeletion(ctx.services, id, requestAttribution(ctx));
      ctx.body = {
        success: true,
        message: `your account will be deleted on ${at.toISOString()}`,
        scheduled_deletion_at: at.toISOString(),
      };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/me/cancel-deletion',
      summary: 'Cancel the scheduled deletion of the own account',
      tags: TAG,
      auth: { account: ACCOUNT_SCOPES.delete },
      responses: {
        200: { description: '{success, message}', schema: successSchema },
        409: { description: 'No deletion scheduled' },
      },
    },
    async (ctx) => {
      const id = requireActingUser(ctx.state.principal);
      await cancelDeletion(ctx.services, id, requestAttribution(ctx));
      ctx.body = { success: true, message: 'the scheduled deletion of your account was cancelled' };
    },
  );

  // --- collection and system routes
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users',
      summary: 'List users',
      tags: TAG,
      auth: { permission: 'users:read' },
      cacheBy: ['users'],
      query: paginationQuery(20).extend({ include_deleted: zQueryBool().optional() }),
      responses: { 200: { description: 'A page of users', schema: pageSchema(userSchema) } },
    },
    async (ctx, { query }) => {
      const q = User.query(ctx.services.db).orderBy('created_at', 'asc').orderBy('id');
      if (!query.include_deleted) q.whereNull('deleted_at');
      ctx.body = await paginate(ctx, q, query, presentUser, {
        counter: query.include_deleted ? 'users_all' : 'users_live',
      });
    },
  );

  userLookupRoutes(router);

  // --- single user
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/:id',
      summary: 'Get a user',
      tags: TAG,
      auth: self('users:read'),
      params: userIdParam,
      responses: { 200: userResponse },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      ctx.body = resource(
        ctx,
        presentUser(await loadUser(ctx.services.db, id, { includeDeleted: true })),
        userPath(id),
      );
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/:id/profile',
      summary: "A user's profile (unwrapped)",
      tags: TAG,
      auth: self('users:read'),
      params: userIdParam,
      responses: { 200: { description: 'Profile', schema: profileSchema } },
    },
    async (ctx, { params }) => {
      const db = ctx.services.db;
      const id = resolveUserRef(ctx, params.id);
      const view = await userView(db, id);
      if (!view) throw notFound('user');
      ctx.body = presentProfile(view.user, view.accounts, view.lastSignInPlatform);
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/users/:id',
      summary: 'Update a user',
      description:
        'username, email, avatar_url (both on the primary platform account), privacy_mode, avatars_enabled. avatars_enabled=false removes every avatar URL ' +
        'of the user and keeps later sign-ins from filling them. The sign-in address of an email account changes only through /email/request-change.',
      tags: TAG,
      auth: manage('users:write'),
      params: userIdParam,
      body: z.object({
        username: zUsername().optional(),
        email: zEmail().optional(),
        avatar_url: zHttpUrl().nullable().optional(),
        privacy_mode: z.boolean().optional(),
        avatars_enabled: z.boolean().optional(),
      }),
      responses: { 200: userResponse, 409: { description: 'Username or email taken' } },
    },
    async (ctx, { params, body }) => {
      const id = resolveUserRef(ctx, params.id);
      // Every field is optional (spec §4.11); an empty body changes nothing and answers the user.
      const user = emptyPatch(body)
        ? await loadUser(ctx.services.db, id)
        : await updateUser(ctx.services, id, body, requestAttribution(ctx));
      ctx.body = resource(ctx, presentUser(user), userPath(id));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/users/:id/locale',
      summary: "Set or clear a user's preferred locale",
      description:
        'Supported locales are configurable (system config auth.supported_locales; default en and de). null clears.',
      tags: TAG,
      auth: manage('users:write'),
      params: userIdParam,
      body: z.object({
        locale: z
          .string({ required_error: 'is required (null clears)', invalid_type_error: 'must be a string or null' })
          .trim()
          .toLowerCase()
          .nullable(),
      }),
      responses: { 200: userResponse },
    },
    async (ctx, { params, body }) => {
      const id = resolveUserRef(ctx, params.id);
      ctx.body = resource(
        ctx,
        presentUser(await setPreferredLocale(ctx.services, id, body.locale, requestAttribution(ctx))),
        userPath(id),
      );
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
      responses: {
        200: userResponse,
        400: { description: 'Invalid username' },
        404: { description: 'No such user' },
        409: { description: 'Username taken' },
      },
    },
    async (ctx, { params, body }) => {
      const id = resolveUserRef(ctx, params.id);
      const user = await changeUsername(ctx.services, id, body.username, requestAttribution(ctx));
      ctx.body = resource(ctx, presentUser(user), userPath(id));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/users/:id',
      summary: 'Soft-delete a user',
      description:
        'Sets deleted_at, revokes every session, API key and OAuth grant (access and refresh tokens, consents) at once and schedules the purge after the grace period (cancel-deletion restores the account, not its credentials).',
      tags: TAG,
      auth: { permission: 'users:delete', manages: 'id' },
      params: userIdParam,
      responses: {
        204: { description: 'Deleted' },
        404: { description: 'No such user' },
        409: { description: 'Already deleted, or the last administrator' },
      },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await softDeleteUser(ctx.services, id, { ...requestAttribution(ctx), reason: 'deleted by an administrator' });
      noContent(ctx);
    },
  );

  userRoleRoutes(router);
}
