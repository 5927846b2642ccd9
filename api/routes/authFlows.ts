import Router from '@koa/router';
import { passwordLogin } from '../../shared/commands/login';
import { requestPasswordReset, resetPassword } from '../../shared/commands/passwordResets';
import { zEmail, zEmailedToken, zNewPassword } from '../../shared/domain/accounts';
import { PASSWORD_MAX } from '../../shared/domain/passwords';
import { z, zChars } from '../../shared/zod';
import { authRequestMeta, clientIp } from '../params';
import { defineRoute, AppState } from '../routing';
import type { ApiServices } from '../services';
import { registrationRoutes } from './registration';
import { messageSchema, successSchema } from '../responses';
import { loginResultSchema } from '../../shared/presenters/login';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['auth'];
const RESET_ACCEPTED = 'if an account with this address exists, we sent an email with a link to reset the password';

/** The /v1/auth/* routes of decisions.md: email/password registration, sign-in and recovery. */
export function authFlowRoutes(router: ApiRouter): void {
  registrationRoutes(router);

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/login',
      summary: 'Sign in with email and password',
      description:
        'Answers {data: flattened user, session: {sessionToken, expires}}, or, when a second factor is required, {requires_two_factor, challenge_token, expires_at} ' +
        'and no session. Wrong credentials are one 401 for unknown address and wrong password alike. Every attempt is counted per account and per IP before ' +
        'the password is checked (the right password gives its count back); past the threshold the answer is 429 with Retry-After, without a check.',
      tags: TAG,
      auth: 'public',
      body: z.object({ email: zEmail(), password: zChars({ min: 1, minMessage: 'is required', max: PASSWORD_MAX }) }),
      bodyExample: { email: 'alice@example.com', password: 'correct horse battery staple' },
      responses: {
        200: { description: 'Signed in, or a 2FA challenge', schema: loginResultSchema },
        401: { description: 'Wrong email or password' },
        403: { description: 'Email sign-in disabled, address not verified, or account banned' },
        429: { description: 'Too many failed attempts (Retry-After)' },
      },
    },
    async (ctx, { body }) => {
      ctx.body = await passwordLogin(ctx.services, body, clientIp(ctx), authRequestMeta(ctx));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/reset-password/request',
      summary: 'Ask for a password reset email',
      description:
        'Always 202 with the same message, whether or not the address has an account, and in the same time: the lookup, the token and the mail are done ' +
        'by a job after the answer. At most one reset mail per address per minute.',
      tags: TAG,
      auth: 'public',
      body: z.object({ email: zEmail() }),
      responses: { 202: { description: '{message}', schema: messageSchema } },
    },
    async (ctx, { body }) => {
      await requestPasswordReset(ctx.services, body.email, authRequestMeta(ctx));
      ctx.status = 202;
      ctx.body = { message: RESET_ACCEPTED };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/reset-password/confirm',
      summary: 'Set a new password with the emailed token',
      description:
        "Every session and every OAuth access and refresh token of the user is revoked (OAuth consents stay): their session sockets get sessionRevoked and close with 4004; the user's sockets signed in with OAuth tokens get forceLogout and close with 4005.",
      tags: TAG,
      auth: 'public',
      body: z.object({ token: zEmailedToken(), password: zNewPassword() }),
      responses: {
        200: { description: '{success, message}', schema: successSchema },
        400: { description: 'Invalid or expired token' },
      },
    },
    async (ctx, { body }) => {
      await resetPassword(ctx.services, body.token, body.password, authRequestMeta(ctx));
      ctx.body = { success: true, message: 'your password was changed; sign in again on every device' };
    },
  );
}
