import type { Ban } from '../models/Ban';
import { iso } from './iso';

/** Ban (spec §2); `history` adds unbanned_at / unbanned_by (GET /v1/users/{id}/bans). */
export function presentBan(b: Ban, opts: { history?: boolean } = {}) {
  return {
    id: b.id,
    user_id: b.user_id,
    reason: b.reason,
    banned_by: b.banned_by,
    banned_at: iso(b.banned_at),
    expires_at: iso(b.expires_at),
    is_permanent: b.is_permanent,
    ...(opts.history ? { unbanned_at: iso(b.unbanned_at), unbanned_by: b.unbanned_by } : {}),
  };
}
