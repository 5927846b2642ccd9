import type { Ban } from '../models/Ban';
import { z } from '../zod';
import { iso } from './iso';

/** Ban (spec §2). */
export const banSchema = z.object({
  id: z.string().uuid(),
  user_id: z.string().uuid(),
  reason: z.string().nullable(),
  banned_by: z.string().uuid().nullable(),
  banned_at: z.string(),
  expires_at: z.string().nullable(),
  is_permanent: z.boolean(),
});

/** A ban in a user's history (GET /v1/users/{id}/bans): with who lifted it and when. */
export const banHistoryEntrySchema = banSchema.extend({
  unbanned_at: z.string().nullable(),
  unbanned_by: z.string().uuid().nullable(),
});

/** Whether a user is banned now, with the active ban. */
export const banStatusSchema = z.object({ is_banned: z.boolean(), active_ban: banSchema.nullable() });

/** A ban as its creation and the status read show it. */
export function presentBan(b: Ban): z.infer<typeof banSchema> {
  return {
    id: b.id,
    user_id: b.user_id,
    reason: b.reason,
    banned_by: b.banned_by,
    banned_at: iso(b.banned_at),
    expires_at: iso(b.expires_at),
    is_permanent: b.is_permanent,
  };
}

/** A ban of the history list, lifted or not. */
export function presentBanHistoryEntry(b: Ban): z.infer<typeof banHistoryEntrySchema> {
  return { ...presentBan(b), unbanned_at: iso(b.unbanned_at), unbanned_by: b.unbanned_by };
}

/** The active ban of a user, if any. */
export function presentBanStatus(ban: Ban | undefined): z.infer<typeof banStatusSchema> {
  return { is_banned: !!ban, active_ban: ban ? presentBan(ban) : null };
}
