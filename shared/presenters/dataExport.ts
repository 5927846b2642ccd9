import { isIP } from 'node:net';
import type { ExportLog } from '../models/ExportLog';
import type { DataExportRows } from '../queries/dataExport';
import { describeSession } from './userSession';
import { z } from '../zod';
import { iso } from './iso';

/** Version of the data.json layout; raised when a section or field changes meaning. */
export const DATA_EXPORT_VERSION = '1.0';

/** Export log entry (spec §2), camelCase like the rest of the export. */
export const exportLogSchema = z.object({
  id: z.string(),
  exportedAt: z.string(),
  ipAddress: z.string().nullable(),
  userAgent: z.string().nullable(),
  exportFormat: z.string(),
  fileSizeBytes: z.number().int(),
  locale: z.string(),
  createdAt: z.string(),
});

/** GET /v1/user/export/logs. */
export const exportLogPageSchema = z.object({
  logs: z.array(exportLogSchema),
  total: z.number().int(),
  hasMore: z.boolean(),
});

/**
 * data.json of the personal data export (spec §2 Data export archive). Lists what the user may
 * know about their account and nothing that would let anyone sign in as them: no key, token or
 * secret, no hash of one.
 */
export const dataExportSchema = z.object({
  exportInfo: z.object({ exportedAt: z.string(), format: z.literal('zip'), version: z.string() }),
  user: z.object({
    id: z.string(),
    username: z.string(),
    primaryPlatformAccountId: z.string().nullable(),
    preferredLocale: z.string().nullable(),
    privacyMode: z.boolean(),
    avatarsEnabled: z.boolean(),
    createdAt: z.string(),
    updatedAt: z.string(),
    lastLoginAt: z.string().nullable(),
    deletedAt: z.string().nullable(),
  }),
  platformAccounts: z.array(
    z.object({
      id: z.string(),
      platformName: z.string().nullable(),
      platformSlug: z.string().nullable(),
      platformUserId: z.string(),
      isOauth: z.boolean(),
      isPrimary: z.boolean(),
      username: z.string().nullable(),
      email: z.string().nullable(),
      emailVerifiedAt: z.string().nullable(),
      avatarUrl: z.string().nullable(),
      createdAt: z.string(),
      updatedAt: z.string(),
    }),
  ),
  connectedApps: z.array(
    z.object({
      id: z.string(),
      clientId: z.string(),
      clientName: z.string(),
      homepageUrl: z.string().nullable(),
      isFirstParty: z.boolean(),
      scopes: z.array(z.string()),
      grantedAt: z.string(),
      updatedAt: z.string(),
    }),
  ),
  ownedApps: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      description: z.string().nullable(),
      homepageUrl: z.string().nullable(),
      privacyPolicyUrl: z.string().nullable(),
      termsOfServiceUrl: z.string().nullable(),
      redirectUris: z.array(z.string()),
      allowedScopes: z.array(z.string()),
      clientType: z.string(),
      isActive: z.boolean(),
      createdAt: z.string(),
      updatedAt: z.string(),
    }),
  ),
  apiKeys: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      description: z.string().nullable(),
      keyPrefix: z.string(),
      scopes: z.array(z.string()),
      isActive: z.boolean(),
      expiresAt: z.string().nullable(),
      lastUsedAt: z.string().nullable(),
      createdAt: z.string(),
      updatedAt: z.string(),
    }),
  ),
  roles: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      description: z.string().nullable(),
      isSystem: z.boolean(),
      requiresTwoFactor: z.boolean(),
    }),
  ),
  twoFactorAuth: z.object({
    enabled: z.boolean(),
    enabledAt: z.string().nullable(),
    backupCodesRemaining: z.number().int(),
  }),
  deletionStatus: z.object({
    isScheduledForDeletion: z.boolean(),
    scheduledDeletionAt: z.string().nullable(),
    isDeleted: z.boolean(),
    deletedAt: z.string().nullable(),
  }),
  exportLogs: z.array(exportLogSchema),
  sessions: z.array(
    z.object({
      id: z.string(),
      ipAddress: z.string().nullable(),
      userAgent: z.string().nullable(),
      deviceType: z.string(),
      browserName: z.string().nullable(),
      osName: z.string().nullable(),
      provider: z.string().nullable(),
      providerName: z.string().nullable(),
      lastActivityAt: z.string(),
      createdAt: z.string(),
      expiresAt: z.string(),
    }),
  ),
});
export type DataExport = z.infer<typeof dataExportSchema>;

/**
 * An IP address with its host part hidden: IPv4 keeps the first two octets (`203.0.*.*`), IPv6
 * the first three groups (`2001:db8:85a3:*`), an IPv4-mapped IPv6 address is shown as IPv4.
 * Anything else is fully masked.
 */
export function maskIp(ip: string | null): string | null {
  if (!ip) return null;
  const v4 = ip.startsWith('::ffff:') && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip;
  if (isIP(v4) === 4) return `${v4.split('.').slice(0, 2).join('.')}.*.*`;
  if (isIP(ip) === 6) {
    const [head] = ip.split('::');
    const groups = head.split(':').filter(Boolean).slice(0, 3);
    return groups.length ? `${groups.join(':')}:*` : '*';
  }
  return '*';
}

/** One export log entry. */
export function presentExportLog(l: ExportLog): z.infer<typeof exportLogSchema> {
  return {
    id: l.id,
    exportedAt: iso(l.exported_at),
    ipAddress: l.ip_address,
    userAgent: l.user_agent,
    exportFormat: l.export_format,
    fileSizeBytes: Number(l.file_size_bytes),
    locale: l.locale,
    createdAt: iso(l.created_at),
  };
}

/** data.json from the loaded rows. */
export function presentDataExport(r: DataExportRows, exportedAt: Date): DataExport {
  const u = r.user;
  return {
    exportInfo: { exportedAt: iso(exportedAt), format: 'zip', version: DATA_EXPORT_VERSION },
    user: {
      id: u.id,
      username: u.username,
      primaryPlatformAccountId: u.primary_platform_account_id,
      preferredLocale: u.preferred_locale,
      privacyMode: u.privacy_mode,
      avatarsEnabled: u.avatars_enabled,
      createdAt: iso(u.created_at),
      updatedAt: iso(u.updated_at),
      lastLoginAt: iso(u.last_login_at),
      deletedAt: iso(u.deleted_at),
    },
    platformAccounts: r.platformAccounts.map((a) => ({
      id: a.id,
      platformName: a.platform?.name ?? null,
      platformSlug: a.platform?.slug ?? null,
      platformUserId: a.platform_user_id,
      isOauth: a.is_oauth,
      isPrimary: a.is_primary,
      username: a.username,
      email: a.email,
      emailVerifiedAt: iso(a.email_verified_at),
      avatarUrl: a.avatar_url,
      createdAt: iso(a.created_at),
      updatedAt: iso(a.updated_at),
    })),
    connectedApps: r.consents.map((c) => ({
      id: c.id,
      clientId: c.client_id,
      clientName: c.client.name,
      homepageUrl: c.client.homepage_url,
      isFirstParty: c.client.is_first_party,
      scopes: c.scopes,
      grantedAt: iso(c.granted_at),
      updatedAt: iso(c.updated_at),
    })),
    ownedApps: r.ownedClients.map((c) => ({
      id: c.id,
      name: c.name,
      description: c.description,
      homepageUrl: c.homepage_url,
      privacyPolicyUrl: c.privacy_policy_url,
      termsOfServiceUrl: c.terms_of_service_url,
      redirectUris: c.redirect_uris,
      allowedScopes: c.allowed_scopes,
      clientType: c.client_type,
      isActive: c.is_active,
      createdAt: iso(c.created_at),
      updatedAt: iso(c.updated_at),
    })),
    apiKeys: r.apiKeys.map((k) => ({
      id: k.id,
      name: k.name,
      description: k.description,
      keyPrefix: k.key_prefix,
      scopes: k.scopes,
      isActive: k.is_active,
      expiresAt: iso(k.expires_at),
      lastUsedAt: iso(k.last_used_at),
      createdAt: iso(k.created_at),
      updatedAt: iso(k.updated_at),
    })),
    roles: r.roles.map((role) => ({
      id: role.id,
      name: role.name,
      description: role.description,
      isSystem: role.is_system,
      requiresTwoFactor: role.requires_two_factor,
    })),
    twoFactorAuth: {
      enabled: r.twoFactor.enabled,
      enabledAt: iso(r.twoFactor.enabledAt),
      backupCodesRemaining: r.twoFactor.backupCodesRemaining,
    },
    deletionStatus: {
      isScheduledForDeletion: !!u.scheduled_deletion_at,
      scheduledDeletionAt: iso(u.scheduled_deletion_at),
      isDeleted: !!u.deleted_at,
      deletedAt: iso(u.deleted_at),
    },
    exportLogs: r.exportLogs.map(presentExportLog),
    sessions: r.sessions.map((s) => {
      const d = describeSession(s, r.platformNames);
      return {
        id: s.id,
        // A string, as in the session list (describeSession): '' when none was recorded.
        ipAddress: maskIp(s.ip_address) ?? '',
        userAgent: d.user_agent,
        deviceType: d.device_type,
        browserName: d.browser_name,
        osName: d.os_name,
        provider: d.provider,
        providerName: d.provider_name,
        lastActivityAt: iso(s.last_activity_at),
        createdAt: iso(s.created_at),
        expiresAt: iso(s.expires_at),
      };
    }),
  };
}
