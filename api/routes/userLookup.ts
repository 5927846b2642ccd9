import Router from '@koa/router';
import { oauthSignin, oauthSigninSchema } from '../../shared/commands/oauthSignin';
import { zLookupEmail } from '../../shared/domain/accounts';
import { notFound } from '../../shared/errors';
import { User } from '../../shared/models/User';
import { actingUserId, authorize, can, subjects } from '../../shared/policies';
import { flatUserSchema } from '../../shared/presenters/user';
import { flatUser, flatUserByEmail, ownsEmail } from '../../shared/queries/users';
import { z } from '../../shared/zod';
import { resource, resourceSchema } from '../responses';
import { defineRoute, AppContext, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['users'];
const userPath = (id: string) => `/v1/users/${id}`;

/**
 * The caller's own live user when the address is one of theirs. Decided before any lookup of
 * other users, so the answer says nothing about them; a narrowed credential needs users:read.
 */
async function ownUserByEmail(ctx: AppContext, email: string): Promise<string | undefined> {
  const p = ctx.state.principal;
  const db = ctx.services.db;
  const own = actingUserId(p);
  authorize(p, 'read', subjects.userLookup(own && (await ownsEmail(db, own, email)) ? own : null));
  return (await User.query(db).findById(own!).whereNull('deleted_at')) ? own! : undefined;
}

/** Finding users by provider sign-in (system key) and by email address. */
export function userLookupRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/oauth',
      summary: 'Create or update a user from a provider sign-in (system key only)',
      description:
        'Links the provider account to an existing user with the same (verified) email. Any other caller gets 401.',
      tags: TAG,
      auth: 'system',
      body: oauthSigninSchema,
      responses: {
        200: {
          description:
            '{data: flattened user, two_factor_setup_required}: the flag asks the client to send the user to the 2FA setup',
          schema: resourceSchema(flatUserSchema).extend({ two_factor_setup_required: z.boolean() }),
        },
        400: { description: 'Unknown platform' },
        401: { description: 'Not the system key' },
        403: { description: 'Platform disabled' },
      },
    },
    async (ctx, { body }) => {
      const input = {
        email: body.email ?? null,
        name: body.name,
        oauthProvider: body.oauthProvider,
        oauthProviderId: body.oauthProviderId,
        image: body.image ?? null,
      };
      const r = await oauthSignin(ctx.services, input, requestAttribution(ctx));
      // two_factor_setup_required: 2FA is required for this user (roles, platforms) but not enabled.
      ctx.body = { ...resource(ctx, r.user, userPath(r.user.id)), two_factor_setup_required: r.twoFactorSetupRequired };
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/email/:email',
      summary: 'Find a user by email',
      description:
        'The system key may look up any address; every other caller only their own (403 otherwise, whatever its ' +
        'permissions: users:read lists users through GET /v1/users).',
      tags: TAG,
      auth: 'authenticated',
      params: z.object({ email: zLookupEmail() }),
      responses: {
        200: { description: '{data: flattened user}', schema: resourceSchema(flatUserSchema) },
        401: { description: 'No credentials' },
        403: { description: "Another user's address" },
        404: { description: 'Not found' },
      },
    },
    async (ctx, { params }) => {
      const db = ctx.services.db;
      const anyone = can(ctx.state.principal, 'read', subjects.userLookup(null));
      if (anyone) {
        const user = await flatUserByEmail(db, params.email);
        if (!user) throw notFound('user');
        ctx.body = resource(ctx, user, userPath(user.id));
        return;
      }
      const userId = await ownUserByEmail(ctx, params.email);
      if (!userId) throw notFound('user');
      ctx.body = resource(ctx, await flatUser(db, userId), userPath(userId));
    },
  );
}
