import { z } from '../zod';
import { flatUserSchema } from './user';

/** A finished sign-in (spec §4.1): the flattened user and the new session. */
export const signedInSchema = z
  .object({
    data: flatUserSchema,
    session: z.object({ sessionToken: z.string(), expires: z.string().datetime() }),
  })
  .openapi('SignedIn');

/** A sign-in that needs its second factor: the challenge for POST /v1/auth/2fa/check. */
export const twoFactorChallengeSchema = z
  .object({ requires_two_factor: z.literal(true), challenge_token: z.string(), expires_at: z.string().datetime() })
  .openapi('TwoFactorChallenge');

/** What a password sign-in answers. */
export const loginResultSchema = z.union([signedInSchema, twoFactorChallengeSchema]);
