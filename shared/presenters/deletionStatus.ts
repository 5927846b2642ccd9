import type { User } from '../models/User';
import { z } from '../zod';
import { iso } from './iso';

/** Where a user stands on account deletion (GET /v1/admin/users/{id}/deletion-status). */
export const deletionStatusSchema = z.object({
  is_scheduled_for_deletion: z.boolean(),
  scheduled_deletion_at: z.string().nullable(),
  is_deleted: z.boolean(),
  deleted_at: z.string().nullable(),
});

/** A user's deletion state: scheduled (and when), soft-deleted (and when). */
export function presentDeletionStatus(u: User): z.infer<typeof deletionStatusSchema> {
  return {
    is_scheduled_for_deletion: !!u.scheduled_deletion_at,
    scheduled_deletion_at: iso(u.scheduled_deletion_at),
    is_deleted: !!u.deleted_at,
    deleted_at: iso(u.deleted_at),
  };
}
