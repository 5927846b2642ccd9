import type { AccountToken } from '../models/AccountToken';
import { z } from '../zod';
import { iso } from './iso';

/** The pending email change of a user (GET /v1/users/{id}/email/pending). */
export const pendingEmailChangeSchema = z.object({
  pending: z.boolean(),
  new_email: z.string().nullable(),
  expires_at: z.string().nullable(),
});

/** The pending email link of a user (GET /v1/users/{id}/email-link/pending). */
export const pendingEmailLinkSchema = z.object({
  pending: z.boolean(),
  email: z.string().nullable(),
  expires_at: z.string().nullable(),
});

export function presentPendingEmailChange(t: AccountToken | undefined): z.infer<typeof pendingEmailChangeSchema> {
  return { pending: !!t, new_email: t ? String(t.payload.new_email) : null, expires_at: t ? iso(t.expires_at) : null };
}

export function presentPendingEmailLink(t: AccountToken | undefined): z.infer<typeof pendingEmailLinkSchema> {
  return { pending: !!t, email: t ? String(t.payload.email) : null, expires_at: t ? iso(t.expires_at) : null };
}
