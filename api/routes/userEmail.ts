import Router from '@koa/router';
import { cancelAccountTokens } from '../../shared/commands/accountTokens';
import {
  EmailRequest,
  INVALID_TOKEN,
  requestEmailChange,
  requestEmailLink,
  useEmailToken,
} from '../../shared/commands/emailFlows';
import { zEmail, zEmailedToken, zNewPassword } from '../../shared/domain/accounts';
import type { AccountTokenPurpose } from '../../shared/models/AccountToken';
import { badRequest, notFound } from '../../shared/errors';
import { ACCOUNT_SCOPES, authorize, subjects } from '../../shared/policies';
import {
  pendingEmailChangeSchema,
  pendingEmailLinkSchema,
  presentPendingEmailChange,
  presentPendingEmailLink,
} from '../../shared/presenters/pendingEmail';
import { peekAccountToken, pendingAccountToken } from '../../shared/queries/accountTokens';
import { z } from '../../shared/zod';
import { defineRoute, AppContext, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';
import { loadUser, resolveUserRef, userIdParam } from '../params';
import { emailSentSchema, messageSchema, successSchema } from '../responses';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['users'];
const self = (permission: string) => ({ permission, self: 'id' });
/** Email changes and links are account security: narrowed credentials need account:email, and a manager must outrank the user. */
const securing = (permission: string) => ({ permission, self: 'id', scope: ACCOUNT_SCOPES.email, manages: 'id' });
const tokenBody = z.object({ token: zEmailedToken() });

const requestMeta = (ctx: AppContext): EmailRequest => ({
  ...requestAttribution(ctx),
  acceptLanguage: ctx.get('accept-language') || null,
});

/**
 * Uses an emailed token on an authenticated route: the policy decides whose token the caller may
 * use (someone else's is reported like an unknown one), then the command claims and applies it.
 */
async function useOwnToken(ctx: AppContext, token: string, purpose: AccountTokenPurpose) {
  const peeked = await peekAccountToken(ctx.services.db, token, [purpose]);
  if (!peeked?.user_id) throw badRequest(INVALID_TOKEN);
  authorize(ctx.state.principal, 'use', subjects.accountToken({ user_id: peeked.user_id }));
  return useEmailToken(ctx.services, token, [purpose], requestMeta(ctx));
}

/** Email change (spec §4.11) and email linking (spec §4.12). */
export function userEmailRoutes(router: ApiRouter): void {
  // --- email change
  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/:id/email/request-change',
      summary: 'Ask to change the address of the email sign-in',
      description:
        'Sends a verification email (24-hour token) to the new address; the address changes only when the token is used.',
      tags: TAG,
      auth: securing('users:write'),
      params: userIdParam,
      body: z.object({ email: zEmail() }),
      responses: {
        200: { description: '{message, expires_at}', schema: emailSentSchema },
        400: { description: 'Invalid email or not an email account' },
        404: { description: 'No such user' },
        409: { description: 'Email in use' },
        429: { description: 'A mail went to this address within the minute, or 10 from this account within the hour' },
      },
    },
    async (ctx, { params, body }) => {
      const id = resolveUserRef(ctx, params.id);
      const { expiresAt } = await requestEmailChange(ctx.services, id, body.email, requestMeta(ctx));
      ctx.body = { message: `we sent a verification email to ${body.email}`, expires_at: expiresAt.toISOString() };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/email/verify',
      summary: 'Confirm an email change with the emailed token',
      tags: TAG,
      auth: { account: ACCOUNT_SCOPES.email },
      body: tokenBody,
      responses: {
        200: { description: '{success, message}', schema: successSchema },
        400: { description: 'Invalid or expired token' },
        409: { description: 'Email in use' },
      },
    },
    async (ctx, { body }) => {
      const result = await useOwnToken(ctx, body.token, 'email_change');
      ctx.body = { success: true, message: `your email address is now ${result.email}` };
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/:id/email/pending',
      summary: 'The pending email change',
      tags: TAG,
      auth: self('users:read'),
      params: userIdParam,
      responses: { 200: { description: '{pending, new_email, expires_at}', schema: pendingEmailChangeSchema } },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      const pending = await pendingAccountToken(ctx.services.db, id, 'email_change');
      if (!pending) throw notFound('user');
      ctx.body = presentPendingEmailChange(pending.row);
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/users/:id/email/pending',
      summary: 'Cancel the pending email change',
      tags: TAG,
      auth: securing('users:write'),
      params: userIdParam,
      responses: {
        200: { description: '{success, message}', schema: successSchema },
        404: { description: 'None pending' },
      },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await loadUser(ctx.services.db, id);
      if (!(await cancelAccountTokens(ctx.services.db, id, 'email_change'))) throw notFound('pending email change');
      ctx.body = { success: true, message: 'the pending email change was cancelled' };
    },
  );

  // --- email link
  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/:id/email-link/request',
      summary: 'Add email and password sign-in to an account',
      description: 'Sends a verification email (24-hour token); the email platform account is created when it is used.',
      tags: TAG,
      auth: securing('users:write'),
      params: userIdParam,
      body: z.object({ email: zEmail(), password: zNewPassword() }),
      responses: {
        200: { description: '{message, expires_at}', schema: emailSentSchema },
        400: { description: 'Invalid input or already linked' },
        404: { description: 'No such user' },
        409: { description: 'Email in use' },
        429: { description: 'A mail went to this address within the minute, or 10 from this account within the hour' },
      },
    },
    async (ctx, { params, body }) => {
      const id = resolveUserRef(ctx, params.id);
      const { expiresAt } = await requestEmailLink(ctx.services, id, body.email, body.password, requestMeta(ctx));
      ctx.body = { message: `we sent a verification email to ${body.email}`, expires_at: expiresAt.toISOString() };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/users/email-link/verify',
      summary: 'Confirm an email link with the emailed token',
      tags: TAG,
      auth: { account: ACCOUNT_SCOPES.email },
      body: tokenBody,
      responses: {
        200: {
          description: '{message, platform_account_id}',
          schema: messageSchema.extend({ platform_account_id: z.string() }),
        },
        400: { description: 'Invalid or expired token' },
        409: { description: 'Email in use' },
      },
    },
    async (ctx, { body }) => {
      const result = await useOwnToken(ctx, body.token, 'email_link');
      ctx.body = { message: 'email sign-in was added to your account', platform_account_id: result.platformAccountId };
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/users/:id/email-link/pending',
      summary: 'The pending email link',
      tags: TAG,
      auth: self('users:read'),
      params: userIdParam,
      responses: { 200: { description: '{pending, email, expires_at}', schema: pendingEmailLinkSchema } },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      const pending = await pendingAccountToken(ctx.services.db, id, 'email_link');
      if (!pending) throw notFound('user');
      ctx.body = presentPendingEmailLink(pending.row);
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/users/:id/email-link/pending',
      summary: 'Cancel the pending email link',
      description:
        'Also 200 when none is pending (the message says so), as spec §4.12 gives this route no 404; ' +
        'the email change twin answers 404 then (spec §4.11).',
      tags: TAG,
      auth: securing('users:write'),
      params: userIdParam,
      responses: {
        200: { description: '{message}: cancelled, or nothing was pending', schema: messageSchema },
        404: { description: 'No such user' },
      },
    },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await loadUser(ctx.services.db, id);
      const cancelled = await cancelAccountTokens(ctx.services.db, id, 'email_link');
      ctx.body = { message: cancelled ? 'the pending email link was cancelled' : 'no email link was pending' };
    },
  );
}
