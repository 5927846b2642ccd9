import Router from '@koa/router';
import {
  disableTwoFactor,
  regenerateBackupCodes,
  setupTwoFactor,
  verifyTwoFactor,
} from '../../shared/commands/twoFactor';
import { checkTwoFactorLogin } from '../../shared/commands/twoFactorLogin';
import {
  backupCodesSchema,
  presentTwoFactorStatus,
  twoFactorDisabledSchema,
  twoFactorRequirementSchema,
  twoFactorSetupSchema,
  twoFactorStatusSchema,
} from '../../shared/presenters/twoFactor';
import { twoFactorRequirement, twoFactorState } from '../../shared/queries/twoFactor';
import { loadUser, authRequestMeta } from '../params';
import { defineRoute, AppContext, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';
import { authorizeTwoFactor } from '../twoFactorAccess';
import { z, zChars, zUuid } from '../../shared/zod';
import { signedInSchema } from '../../shared/presenters/login';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['two-factor'];
const userIdField = zUuid()
  .optional()
  .openapi({
    description:
      'The user whose 2FA this is (default: yourself); acting on another user needs two_factor:manage. The system ' +
      'key acts on users’ 2FA through the GraphQL operations: these routes are not on its allowlist (spec §5.5).',
  });
const userQuery = z.object({ user_id: userIdField });
const codeField = zChars(
  { trim: true, min: 1, minMessage: 'is required', max: 64 },
  z.string({ required_error: 'is required' }),
);
const ACCESS =
  'Your own with two_factor:read (GET) or two_factor:write; another user (user_id) with two_factor:manage and every permission they hold, or as a super admin.';

/** The 403 of the routes above: two_factor:* is checked by the route (api/twoFactorAccess.ts), not its `auth` rule. */
const refused = (action: 'read' | 'write') => ({
  description: `Your own without two_factor:${action}; another user's without two_factor:manage or every permission they hold`,
});

const meta = (ctx: AppContext) => ({ ...requestAttribution(ctx), acceptLanguage: ctx.get('accept-language') || null });

/** Two-factor authentication (spec §4.15) and the sign-in's second step (decisions.md). */
export function twoFactorRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/me/2fa/status',
      summary: 'Two-factor status',
      description: ACCESS,
      tags: TAG,
      auth: 'authenticated',
      query: userQuery,
      responses: {
        200: { description: 'Status', schema: twoFactorStatusSchema },
        403: refused('read'),
        400: { description: 'user_id missing (system key) or invalid' },
        404: { description: 'No such user' },
      },
    },
    async (ctx, { query }) => {
      const userId = await authorizeTwoFactor(ctx.services, ctx.state.principal, 'read', query.user_id);
      await loadUser(ctx.services.db, userId);
      ctx.body = presentTwoFactorStatus(await twoFactorState(ctx.services.db, userId));
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/me/2fa/requirement',
      summary: 'Whether two-factor authentication is required, and why',
      description: `required_by_roles: roles with requires_two_factor; required_by_platforms: linked platforms with two_factor_required. ${ACCESS}`,
      tags: TAG,
      auth: 'authenticated',
      query: userQuery,
      responses: {
        200: { description: 'Requirement', schema: twoFactorRequirementSchema },
        403: refused('read'),
        404: { description: 'No such user' },
      },
    },
    async (ctx, { query }) => {
      const userId = await authorizeTwoFactor(ctx.services, ctx.state.principal, 'read', query.user_id);
      // The user (404) and the requirement in the same turn's batches: one round trip.
      const [, requirement] = await Promise.all([
        loadUser(ctx.services.db, userId),
        twoFactorRequirement(ctx.services.db, userId),
      ]);
      ctx.body = requirement;
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/me/2fa/setup',
      summary: 'Start a two-factor setup',
      description: `A new TOTP secret, its otpauth URI and QR code (PNG data URI), pending for 10 minutes. ${ACCESS}`,
      tags: TAG,
      auth: 'authenticated',
      body: z.object({
        platform_id: zChars({ trim: true, min: 1, max: 100 })
          .optional()
          .openapi({ description: 'Platform id or slug; must support 2FA (default: email)' }),
        user_id: userIdField,
      }),
      responses: {
        200: { description: 'Pending setup', schema: twoFactorSetupSchema },
        403: refused('write'),
        400: { description: 'No such platform, a platform without 2FA support, or 2FA already enabled' },
        404: { description: 'No such user' },
      },
    },
    async (ctx, { body }) => {
      const userId = await authorizeTwoFactor(ctx.services, ctx.state.principal, 'write', body.user_id);
      ctx.body = await setupTwoFactor(ctx.services, userId, body.platform_id);
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/me/2fa/verify',
      summary: 'Finish the setup with a code from the authenticator app',
      description: `Enables 2FA and returns 10 backup codes (shown once); a confirmation email goes out. ${ACCESS}`,
      tags: TAG,
      auth: 'authenticated',
      body: z.object({ code: codeField, user_id: userIdField }),
      responses: {
        200: { description: 'Enabled', schema: backupCodesSchema },
        403: refused('write'),
        400: { description: 'Invalid code, no pending setup, setup expired, or already enabled' },
        404: { description: 'No such user (user_id)' },
        429: { description: 'Too many wrong codes (Retry-After)' },
      },
    },
    async (ctx, { body }) => {
      const userId = await authorizeTwoFactor(ctx.services, ctx.state.principal, 'write', body.user_id);
      ctx.body = await verifyTwoFactor(ctx.services, userId, body.code, meta(ctx));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/users/me/2fa',
      summary: 'Turn two-factor authentication off',
      description: `With a TOTP or backup code; an alert email goes out. ${ACCESS}`,
      tags: TAG,
      auth: 'authenticated',
      body: z.object({ code: codeField, user_id: userIdField }),
      responses: {
        200: { description: 'Disabled', schema: twoFactorDisabledSchema },
        403: refused('write'),
        400: { description: 'Invalid code, or not enabled' },
        404: { description: 'No such user (user_id)' },
        429: { description: 'Too many wrong codes (Retry-After)' },
      },
    },
    async (ctx, { body }) => {
      const userId = await authorizeTwoFactor(ctx.services, ctx.state.principal, 'write', body.user_id);
      ctx.body = await disableTwoFactor(ctx.services, userId, body.code, meta(ctx));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/me/2fa/backup-codes/regenerate',
      summary: 'New backup codes',
      description: `With a TOTP code (a backup code is refused); the old codes stop working at once; a notice email goes out. ${ACCESS}`,
      tags: TAG,
      auth: 'authenticated',
      body: z.object({ code: codeField, user_id: userIdField }),
      responses: {
        200: { description: 'New codes', schema: backupCodesSchema },
        403: refused('write'),
        400: { description: 'Invalid code, a backup code, or not enabled' },
        404: { description: 'No such user (user_id)' },
        429: { description: 'Too many wrong codes (Retry-After)' },
      },
    },
    async (ctx, { body }) => {
      const userId = await authorizeTwoFactor(ctx.services, ctx.state.principal, 'write', body.user_id);
      ctx.body = await regenerateBackupCodes(ctx.services, userId, body.code, meta(ctx));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/2fa/check',
      summary: 'Finish a sign-in with the second factor',
      description:
        'The challenge_token of POST /v1/auth/login and a TOTP or backup code; answers as a successful sign-in. ' +
        'After 5 wrong codes in a row the user’s code checks answer 429 with Retry-After for a cool-down that grows.',
      tags: ['auth'],
      auth: 'public',
      body: z.object({
        challenge_token: zChars({ min: 1, minMessage: 'is required', max: 2000 }),
        code: codeField,
      }),
      responses: {
        200: { description: '{data: flattened user, session: {sessionToken, expires}}', schema: signedInSchema },
        400: { description: 'Invalid or expired challenge, or invalid code' },
        429: { description: 'Too many wrong codes (Retry-After)' },
      },
    },
    async (ctx, { body }) => {
      ctx.body = await checkTwoFactorLogin(ctx.services, body, authRequestMeta(ctx));
    },
  );
}
