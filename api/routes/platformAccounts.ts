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
      // The user (404) and the accounts in the same turn's batches: one round trip.
      const [, accounts] = await Promise.all([
        loadUser(ctx.services.db, id, { includeDeleted: true }),
        userAccounts(ctx.services.db, id),
      ]);
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
      // As the list: the user (404) and their accounts in the same turn's batches, one round trip.
      const [, accounts] = await Promise.all([
        loadUser(ctx.services.db, id, { includeDeleted: true }),
        userAccounts(ctx.services.db, id),
      ]);
      const account = accounts.find((a) => a.id === params.account_id);
      if (!account) throw notFound('platform account');
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
