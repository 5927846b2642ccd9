import type { Session } from '../models/Session';
import { z } from '../zod';
import { iso } from './iso';

/** Internal session (spec §2 "Session (internal)"): the NextAuth-style shape. */
export const internalSessionSchema = z.object({
  id: z.string(),
  sessionToken: z.string(),
  userId: z.string(),
  expires: z.string(),
  created_at: z.string(),
});

/** Internal session with its raw token (only the creator and the token's holder see it). */
export function presentInternalSession(s: Session, sessionToken: string): z.infer<typeof internalSessionSchema> {
  return {
    id: s.id,
    sessionToken,
    userId: s.user_id,
    expires: iso(s.expires_at),
    created_at: iso(s.created_at),
  };
}
