import { z } from '../zod';

/** Responses of the 2FA routes (spec §4.15); the commands build them in this shape. */
export const twoFactorStatusSchema = z.object({
  enabled: z.boolean(),
  enabled_at: z.string().nullable(),
  setup_platform: z.string().nullable(),
  platform_slug: z.string().nullable(),
  backup_codes_remaining: z.number().int(),
});

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
