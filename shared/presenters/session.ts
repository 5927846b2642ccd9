import type { Session } from '../models/Session';

/** Internal session (spec §2 "Session (internal)"): the NextAuth-style shape. */
export function presentInternalSession(s: Session, sessionToken: string) {
  return {
    id: s.id,
    sessionToken,
    userId: s.user_id,
    expires: s.expires_at.toISOString(),
    created_at: s.created_at.toISOString(),
  };
}
