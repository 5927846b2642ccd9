import Router from '@koa/router';
import { useEmailToken } from '../../shared/commands/emailFlows';
import { completeRegistration, startRegistration } from '../../shared/commands/registration';
import { zEmail, zEmailedToken, zNewPassword, zUsername } from '../../shared/domain/accounts';
import { flatUserSchema } from '../../shared/presenters/user';
import { flatUser } from '../../shared/queries/users';
import { z, zChars } from '../../shared/zod';
import { authRequestMeta, clientIp } from '../params';
import { created, messageSchema, resource, resourceSchema, successSchema } from '../responses';
import { defineRoute, AppState } from '../routing';
import type { ApiServices } from '../services';

type ApiRouter = Router<AppState, { services: ApiServices }>;

const TAG = ['auth'];
const REGISTER_ACCEPTED = 'check your inbox: if the address can be used, we sent an email with the next step';

/** What each kind of emailed token says once used at /v1/auth/verify-email. */
const VERIFIED_MESSAGE = {
  email_change: 'your email address was changed',
  email_link: 'email sign-in was added to your account',
  email_verification: 'your email address is verified',
} as const;

/** Email/password registration and the anonymous confirmation of emailed addresses. */
export function registrationRoutes(router: ApiRouter): void {
  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/register',
      summary: 'Start an email/password registration',
      description:
        'Always 202 with the same message: a verification mail goes to a free address, a "you already have an account" mail to the owner of a taken one. ' +
        'The account is created by /v1/auth/register/verify. A taken username is not refused here either (that would tell anyone which names exist): ' +
        'it is checked when the account is created, and a name taken by then is replaced by a free one close to it (alice → alice_3f9a1c). ' +
        'Every registration counts on its client IP: past RATE_LIMIT_REGISTER (30) within RATE_LIMIT_REGISTER_WINDOW_SECONDS (15 minutes) the answer is 429 with Retry-After, ' +
        'for a taken address and a free one alike.',
      tags: TAG,
      auth: 'public',
      body: z.object({
        email: zEmail(),
        password: zNewPassword(),
        username: zUsername().optional(),
        locale: zChars({ max: 10 }).optional(),
      }),
      bodyExample: { email: 'alice@example.com', password: 'correct horse battery staple', username: 'alice' },
      responses: {
        202: { description: '{message}', schema: messageSchema },
        403: { description: 'Email sign-in is disabled' },
        429: {
          description: 'Too many registrations from this IP address (RATE_LIMIT_REGISTER); Retry-After says when',
        },
      },
    },
    async (ctx, { body }) => {
      await startRegistration(ctx.services, body, clientIp(ctx), authRequestMeta(ctx));
      ctx.status = 202;
      ctx.body = { message: REGISTER_ACCEPTED };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/register/verify',
      summary: 'Finish a registration with the emailed token',
      description:
        'Creates the user (User role) with an email platform account whose address counts as verified. The username asked for at registration is used when ' +
        'it is still free; when it is taken by now the user gets a free one close to it (alice → alice_3f9a1c), and without one a name made from the ' +
        'address. data.username says which; the user can change it later (PATCH /v1/users/{id}).',
      tags: TAG,
      auth: 'public',
      body: z.object({ token: zEmailedToken() }),
      responses: {
        201: { description: '{data: flattened user}', schema: resourceSchema(flatUserSchema) },
        400: { description: 'Invalid or expired token' },
        409: { description: 'Address taken meanwhile' },
      },
    },
    async (ctx, { body }) => {
      const userId = await completeRegistration(ctx.services, body.token, authRequestMeta(ctx));
      created(ctx, resource(ctx, await flatUser(ctx.services.db, userId), `/v1/users/${userId}`));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/auth/verify-email',
      summary: 'Confirm an emailed verification token',
      description:
        'Accepts the tokens of address verification, email change and email link mails, so a link works without being signed in.',
      tags: TAG,
      auth: 'public',
      body: z.object({ token: zEmailedToken() }),
      responses: {
        200: { description: '{success, message}', schema: successSchema },
        400: { description: 'Invalid or expired token' },
        409: { description: 'Address taken meanwhile' },
      },
    },
    async (ctx, { body }) => {
      const purposes = ['email_verification', 'email_change', 'email_link'] as const;
      const result = await useEmailToken(ctx.services, body.token, [...purposes], authRequestMeta(ctx));
      ctx.body = { success: true, message: VERIFIED_MESSAGE[result.purpose as (typeof purposes)[number]] };
    },
  );
}
