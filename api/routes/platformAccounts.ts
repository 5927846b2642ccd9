import Router from '@koa/router';
import { ACCOUNT_SCOPES } from '../../shared/policies';
import { recordAuditEvent } from '../../shared/audit';
import { userAccounts } from '../../shared/queries/users';
import { badRequest, conflict, notFound } from '../../shared/errors';
import { PlatformAccount } from '../../shared/models/PlatformAccount';
import { User } from '../../shared/models/User';
import { presentPlatformAccount } from '../../shared/presenters/platformAccount';
import { z, zUuid } from '../../shared/zod';
import { defineRoute, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';
import { loadUser, resolveUserRef, userIdParam, zUserRef } from '../params';
import { noContent } from '../responses';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['users'];
const accountParams = z.object({ id: zUserRef(), account_id: zUuid() });

/** A user's linked platform accounts (spec §4.12): list, set primary, unlink. */
export function platformAccountRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    { method: 'get', path: '/v1/users/:id/accounts', summary: "A user's linked platform accounts", tags: TAG, auth: { permission: 'users:read', self: 'id' }, params: userIdParam },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await loadUser(ctx.services.db, id, { includeDeleted: true });
      ctx.body = { data: (await userAccounts(ctx.services.db, id)).map(presentPlatformAccount), _links: { self: `/v1/users/${id}/accounts` } };
    },
  );

  defineRoute(
    router,
    {
      method: 'put',
      path: '/v1/users/:id/accounts/:account_id/primary',
      summary: 'Make a linked account the primary one',
      tags: TAG,
      auth: { permission: 'users:write', self: 'id', scope: ACCOUNT_SCOPES.email, manages: 'id' },
      params: accountParams,
      responses: { 200: { description: 'ResourceResponse<platform account>' }, 404: { description: 'No such user or account' } },
    },
    async (ctx, { params }) => {
      const db = ctx.services.db;
      const id = resolveUserRef(ctx, params.id);
      await db.transaction(async (trx) => {
        await loadUser(trx, id, { forUpdate: true });
        const account = await PlatformAccount.query(trx).findOne({ id: params.account_id, user_id: id });
        if (!account) throw notFound('platform account');
        await PlatformAccount.query(trx).patch({ is_primary: false }).where('user_id', id).whereNot('id', account.id).where('is_primary', true);
        await PlatformAccount.query(trx).patch({ is_primary: true }).where('id', account.id);
        await User.query(trx).patch({ primary_platform_account_id: account.id }).where('id', id);
      });
      const account = await PlatformAccount.query(db).findById(params.account_id).withGraphFetched('platform');
      ctx.body = { data: presentPlatformAccount(account!), _links: { self: `/v1/users/${id}/accounts/${account!.id}` } };
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
      auth: { permission: 'users:write', self: 'id', scope: ACCOUNT_SCOPES.email, manages: 'id' },
      params: accountParams,
      responses: { 204: { description: 'Unlinked' }, 400: { description: 'Email sign-in account' }, 404: { description: 'No such user or account' }, 409: { description: 'Last or primary account' } },
    },
    async (ctx, { params }) => {
      const db = ctx.services.db;
      const id = resolveUserRef(ctx, params.id);
      const actor = requestAttribution(ctx);
      await db.transaction(async (trx) => {
        const user = await loadUser(trx, id, { forUpdate: true });
        const accounts = await userAccounts(trx, id);
        const account = accounts.find((a) => a.id === params.account_id);
        if (!account) throw notFound('platform account');
        if (account.platform?.slug === 'email') throw badRequest('the email sign-in account cannot be unlinked');
        if (accounts.length <= 1) throw conflict('cannot unlink the last platform account: the user could no longer sign in');
        if (account.id === user.primary_platform_account_id || account.is_primary) throw conflict('cannot unlink the primary account: make another account primary first');
        await PlatformAccount.query(trx).deleteById(account.id);
        await recordAuditEvent(
          { user_id: id, event_type: 'account_unlinked', resource_type: 'platform_account', resource_id: account.id, actor_id: actor.actorId, ip_address: actor.ipAddress, user_agent: actor.userAgent, metadata: { platform: account.platform?.slug ?? null } },
          trx,
        );
      });
      noContent(ctx);
    },
  );
}
