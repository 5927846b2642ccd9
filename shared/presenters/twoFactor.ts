import type { TwoFactorState } from '../queries/twoFactor';
import { iso } from './iso';
import { z } from '../zod';

/** Responses of the 2FA routes (spec §4.15); the commands build them in this shape. */
export const twoFactorStatusSchema = z.object({
  enabled: z.boolean(),
  enabled_at: z.string().nullable(),
  setup_platform: z.string().nullable(),
  platform_slug: z.string().nullable(),
  backup_codes_remaining: z.number().int(),
});

/** GET 2fa/status: a pending setup is not enabled (and shows no platform yet). */
export function presentTwoFactorStatus(s: TwoFactorState): z.infer<typeof twoFactorStatusSchema> {
  const enabled = !!s.row?.enabled_at;
  return {
    enabled,
    enabled_at: enabled ? iso(s.row!.enabled_at) : null,
    setup_platform: enabled ? s.platformSlug : null,
    platform_slug: enabled ? s.platformSlug : null,
    backup_codes_remaining: enabled ? s.backupCodesRemaining : 0,
  };
}

export const twoFactorRequirementSchema = z.object({
  required: z.boolean(),
  enabled: z.boolean(),
  required_by_roles: z.array(z.string()),
  required_by_platforms: z.array(z.string()),
  can_enable: z.boolean(),
  reason: z.string(),
});

export const twoFactorSetupSchema = z.object({
  secret: z.string(),
  qr_code_url: z.string(),
  qr_code_image: z.string(),
  expires_at: z.string(),
  platform_slug: z.string(),
});

export const backupCodesSchema = z.object({
  backup_codes: z.array(z.string()),
  message: z.string(),
  platform_slug: z.string().nullable(),
  success: z.boolean(),
});

export const twoFactorDisabledSchema = z.object({ success: z.boolean(), message: z.string() });
