import type { Knex } from 'knex';
import { ApiKey } from '../models/ApiKey';
import { ExportLog } from '../models/ExportLog';
import { OAuthClient } from '../models/OAuthClient';
import { OAuthConsent } from '../models/OAuthConsent';
import { PlatformAccount } from '../models/PlatformAccount';
import { Role } from '../models/Role';
import { Session } from '../models/Session';
import { User } from '../models/User';
import { liveUserSessions } from './sessions';
import { twoFactorState } from './twoFactor';
import { pagesOf } from '../rowLoader';
import { byName } from './byName';

/** Two-factor state as the export shows it (spec §2 twoFactorAuth); never the secret or the codes. */
export interface TwoFactorState {
  enabled: boolean;
  enabledAt: Date | null;
  backupCodesRemaining: number;
}

/** Everything one user's data export holds, as rows (shared/presenters/dataExport.ts shapes it). */
export interface DataExportRows {
  user: User;
  platformAccounts: PlatformAccount[];
  consents: Array<OAuthConsent & { client: OAuthClient }>;
  ownedClients: OAuthClient[];
  apiKeys: ApiKey[];
  roles: Role[];
  twoFactor: TwoFactorState;
  exportLogs: ExportLog[];
  sessions: Session[];
  platformNames: Map<string, string>;
}

/** The user's two-factor state as the export shows it (never the secret): enabled only once verified. */
export async function twoFactorStateForExport(db: Knex, userId: string): Promise<TwoFactorState> {
  const state = await twoFactorState(db, userId);
  const enabledAt = state.row?.enabled_at ?? null;
  return {
    enabled: !!enabledAt,
    enabledAt: enabledAt ? new Date(enabledAt) : null,
    backupCodesRemaining: enabledAt ? state.backupCodesRemaining : 0,
  };
}

/** Loads a user's export data (undefined when the user does not exist), the sections in parallel. */
export async function loadDataExportRows(db: Knex, userId: string): Promise<DataExportRows | undefined> {
  const [user, platformAccounts, consents, ownedClients, apiKeys, roles, twoFactor, exportLogs, live] =
    await Promise.all([
      User.query(db).findById(userId),
      PlatformAccount.query(db)
        .where('user_id', userId)
        .withGraphJoined('platform')
        .orderBy('platform_accounts.created_at'),
      OAuthConsent.query(db)
        .where('oauth_consents.user_id', userId)
        .whereNull('oauth_consents.revoked_at')
        .withGraphJoined('client')
        .orderBy('oauth_consents.granted_at', 'desc'),
      OAuthClient.query(db).where('user_id', userId).orderBy('created_at'),
      ApiKey.query(db).where('user_id', userId).where('is_system', false).orderBy('created_at'),
      Role.query(db)
        .join('user_roles as ur', 'ur.role_id', 'roles.id')
        .where('ur.user_id', userId)
        .orderByRaw(byName('roles'))
        .select('roles.*'),
      twoFactorStateForExport(db, userId),
      ExportLog.query(db).where('user_id', userId).orderBy('exported_at', 'desc').orderBy('id'),
      liveUserSessions(db, userId),
    ]);
  if (!user) return undefined;
  return {
    user,
    platformAccounts,
    consents: consents as Array<OAuthConsent & { client: OAuthClient }>,
    ownedClients,
    apiKeys,
    roles,
    twoFactor,
    exportLogs,
    sessions: live.sessions,
    platformNames: live.platformNames,
  };
}

/** A user's export logs, newest first, a page per user (pagesOf). */
const logPages = pagesOf(ExportLog, 'user_id', 'uuid', [
  ['exported_at', 'desc'],
  ['id', 'desc'],
]);

/** One page of a user's export log, newest first, and how many entries there are in all. */
export async function exportLogPage(
  db: Knex,
  userId: string,
  limit: number,
  offset: number,
): Promise<{ logs: ExportLog[]; total: number }> {
  // The pages of every user asked for in one turn (same limit and offset): one statement.
  const { results, total } = await logPages.load(db, userId, limit, offset);
  return { logs: results, total };
}
