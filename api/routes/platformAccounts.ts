import Router from '@koa/router';
import { setPrimaryAccount, unlinkAccount } from '../../shared/commands/platformAccounts';
import { notFound } from '../../shared/errors';
import { ACCOUNT_SCOPES } from '../../shared/policies';
import { platformAccountSchema, presentPlatformAccount } from '../../shared/presenters/platformAccount';
import { userAccounts } from '../../shared/queries/users';
import { z, zUuid } from '../../shared/zod';
import { loadUser, resolveUserRef, userIdParam, zUserRef } from '../params';
import { listSchema, noContent, resource, resourceSchema } from '../responses';
import { defineRoute, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['users'];
const accountParams = z.object({ id: zUserRef(), account_id: zUuid() });
/** Primary and unlink are account security: narrowed credentials need account:email, a manager must outrank the user. */
const securing = { permission: 'users:write', self: 'id', scope: ACCOUNT_SCOPES.email, manages: 'id' };

/** A user's linked platform accounts (spec §4.12): list, set primary, unlink. */
export function platformAccountRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/:id/accounts',
      summary: "A user's linked platform accounts",
      tags: TAG,
      auth: { permission: 'users:read', self: 'id' },
      params: userIdParam,
      responses: { 200: { description: 'The accounts, oldest first', schema: listSchema(platformAccountSchema) } },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      const accounts = await userAccounts(ctx.services.db, id);
      // Every user keeps at least one account (the last cannot be unlinked): a user is read only
      // when none came back, to answer 404 for no such user (one read per request, not two).
      if (accounts.length === 0) await loadUser(ctx.services.db, id, { includeDeleted: true });
      ctx.body = resource(ctx, accounts.map(presentPlatformAccount), `/v1/users/${id}/accounts`);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/:id/accounts/:account_id',
      summary: "One of a user's linked platform accounts",
      description: "The `_links.self` of setting an account primary. 404 for another user's account.",
      tags: TAG,
      auth: { permission: 'users:read', self: 'id' },
      params: accountParams,
      responses: {
        200: { description: 'ResourceResponse<platform account>', schema: resourceSchema(platformAccountSchema) },
        404: { description: 'No such user or account' },
      },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      const accounts = await userAccounts(ctx.services.db, id);
      const account = accounts.find((a) => a.id === params.account_id);
      if (!account) {
        // No such user is its own 404; the user is read only then (an account's user exists).
        if (accounts.length === 0) await loadUser(ctx.services.db, id, { includeDeleted: true });
        throw notFound('platform account');
      }
      ctx.body = resource(ctx, presentPlatformAccount(account), `/v1/users/${id}/accounts/${account.id}`);
    },
  );

  defineRoute(
    router,
    {
      method: 'put',
      path: '/v1/users/:id/accounts/:account_id/primary',
      summary: 'Make a linked account the primary one',
      tags: TAG,
      auth: securing,
      params: accountParams,
      responses: {
        200: { description: 'ResourceResponse<platform account>', schema: resourceSchema(platformAccountSchema) },
        404: { description: 'No such user or account' },
      },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      const account = await setPrimaryAccount(ctx.services, id, params.account_id);
      ctx.body = resource(ctx, presentPlatformAccount(account), `/v1/users/${id}/accounts/${account.id}`);
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/users/:id/accounts/:account_id',
      summary: 'Unlink a platform account',
      description: 'Refused for the email sign-in account (400), the last account (409) and the primary account (409).',
      tags: TAG,
      auth: securing,
      params: accountParams,
      responses: {
        204: { description: 'Unlinked' },
        400: { description: 'Email sign-in account' },
        404: { description: 'No such user or account' },
        409: { description: 'Last or primary account' },
      },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await unlinkAccount(ctx.services, id, params.account_id, requestAttribution(ctx));
      noContent(ctx);
    },
  );
}
