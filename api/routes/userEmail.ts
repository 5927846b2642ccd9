import Router from '@koa/router';
import { cancelAccountTokens, claimAccountToken, peekAccountToken, pendingAccountToken } from '../../shared/commands/accountTokens';
import { announceEmailVerified, applyEmailChange, applyEmailLink, INVALID_TOKEN, requestEmailChange, requestEmailLink } from '../../shared/commands/emailFlows';
import { PASSWORD_MAX, PASSWORD_MIN } from '../../shared/domain/passwords';
import { zEmail } from '../../shared/domain/accounts';
import type { AccountTokenPurpose } from '../../shared/models/AccountToken';
import { badRequest, notFound } from '../../shared/errors';
import { ACCOUNT_SCOPES, actingUserId, can } from '../../shared/policies';
import { z } from '../../shared/zod';
import { defineRoute, AppContext, AppState, requestAttribution } from '../routing';
import type { ApiServices } from '../services';
import { loadUser, resolveUserRef, userIdParam } from '../params';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['users'];
const self = (permission: string) => ({ permission, self: 'id' });
/** Email changes and links are account security: narrowed credentials need account:email, and a manager must outrank the user. */
const securing = (permission: string) => ({ permission, self: 'id', scope: ACCOUNT_SCOPES.email, manages: 'id' });
const tokenBody = z.object({ token: z.string().min(16, { message: 'is not a valid token' }).max(200) });

const requestMeta = (ctx: AppContext) => ({ ...requestAttribution(ctx), acceptLanguage: ctx.get('accept-language') || null });

/**
 * Uses an emailed token on an authenticated route: the token must belong to the caller (the system
 * key, relaying a link click, and holders of users:write may use anyone's). Someone else's token
 * is reported like an unknown one.
 */
async function useToken<T extends { userId: string }>(ctx: AppContext, token: string, purpose: AccountTokenPurpose, apply: (trx: import('knex').Knex.Transaction, row: NonNullable<Awaited<ReturnType<typeof claimAccountToken>>>) => Promise<T>): Promise<T> {
  const s = ctx.services;
  const p = ctx.state.principal;
  const peeked = await peekAccountToken(s.db, token, [purpose]);
  if (!peeked) throw badRequest(INVALID_TOKEN);
  if (p.kind !== 'system' && peeked.user_id !== actingUserId(p) && !can(p, 'users:write')) throw badRequest(INVALID_TOKEN);
  return s.db.transaction(async (trx) => {
    const row = await claimAccountToken(trx, token, [purpose]);
    if (!row) throw badRequest(INVALID_TOKEN);
    return apply(trx, row);
  });
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
      description: 'Sends a verification email (24-hour token) to the new address; the address changes only when the token is used.',
      tags: TAG,
      auth: securing('users:write'),
      params: userIdParam,
      body: z.object({ email: zEmail() }),
      responses: { 200: { description: '{message, expires_at}' }, 400: { description: 'Invalid email or not an email account' }, 404: { description: 'No such user' }, 409: { description: 'Email in use' } },
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
      responses: { 200: { description: '{success, message}' }, 400: { description: 'Invalid or expired token' }, 409: { description: 'Email in use' } },
    },
    async (ctx, { body }) => {
      const result = await useToken(ctx, body.token, 'email_change', (trx, row) => applyEmailChange(trx, row, requestMeta(ctx)));
      await announceEmailVerified(ctx.services, result);
      ctx.body = { success: true, message: `your email address is now ${result.email}` };
    },
  );

  defineRoute(
    router,
    { method: 'get', path: '/v1/users/:id/email/pending', summary: 'The pending email change', tags: TAG, auth: self('users:read'), params: userIdParam, responses: { 200: { description: '{pending, new_email, expires_at}' } } },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await loadUser(ctx.services.db, id);
      const t = await pendingAccountToken(ctx.services.db, id, 'email_change');
      ctx.body = { pending: !!t, new_email: t ? String(t.payload.new_email) : null, expires_at: t ? t.expires_at.toISOString() : null };
    },
  );

  defineRoute(
    router,
    { method: 'delete', path: '/v1/users/:id/email/pending', summary: 'Cancel the pending email change', tags: TAG, auth: securing('users:write'), params: userIdParam, responses: { 200: { description: '{success, message}' }, 404: { description: 'None pending' } } },
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
      body: z.object({ email: zEmail(), password: z.string().min(PASSWORD_MIN, { message: `must be at least ${PASSWORD_MIN} characters` }).max(PASSWORD_MAX) }),
      responses: { 200: { description: '{message, expires_at}' }, 400: { description: 'Invalid input or already linked' }, 404: { description: 'No such user' }, 409: { description: 'Email in use' } },
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
      responses: { 200: { description: '{message, platform_account_id}' }, 400: { description: 'Invalid or expired token' }, 409: { description: 'Email in use' } },
    },
    async (ctx, { body }) => {
      const result = await useToken(ctx, body.token, 'email_link', (trx, row) => applyEmailLink(trx, row, requestMeta(ctx)));
      await announceEmailVerified(ctx.services, result);
      ctx.body = { message: 'email sign-in was added to your account', platform_account_id: result.platformAccountId };
    },
  );

  defineRoute(
    router,
    { method: 'get', path: '/v1/users/:id/email-link/pending', summary: 'The pending email link', tags: TAG, auth: self('users:read'), params: userIdParam, responses: { 200: { description: '{pending, email, expires_at}' } } },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await loadUser(ctx.services.db, id);
      const t = await pendingAccountToken(ctx.services.db, id, 'email_link');
      ctx.body = { pending: !!t, email: t ? String(t.payload.email) : null, expires_at: t ? t.expires_at.toISOString() : null };
    },
  );

  defineRoute(
    router,
    { method: 'delete', path: '/v1/users/:id/email-link/pending', summary: 'Cancel the pending email link', tags: TAG, auth: securing('users:write'), params: userIdParam, responses: { 200: { description: '{message}' }, 404: { description: 'None pending' } } },
    async (ctx, { params }) => {
      const id = resolveUserRef(ctx, params.id);
      await loadUser(ctx.services.db, id);
      if (!(await cancelAccountTokens(ctx.services.db, id, 'email_link'))) throw notFound('pending email link');
      ctx.body = { message: 'the pending email link was cancelled' };
    },
  );
}
