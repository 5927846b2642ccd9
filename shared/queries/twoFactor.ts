import type { Knex } from 'knex';
import { UserTwoFactor } from '../models/UserTwoFactor';
import { compiledOnce, turnBatcherByDb } from '../rowLoader';

/** A user's 2FA row with its platform and how many backup codes are left, read in one statement. */
export interface TwoFactorState {
  row: UserTwoFactor | undefined;
  platformSlug: string | null;
  platformName: string | null;
  backupCodesRemaining: number;
}

type StateRow = Record<string, unknown> & { _slug: string | null; _name: string | null; _left: number };

/** The 2FA rows (one per user) with platform and backup codes left, of the users `where` picks. */
function stateQuery(db: Knex): Knex.QueryBuilder {
  return db('user_two_factor as t')
    .leftJoin('platforms as p', 'p.id', 't.platform_id')
    .select(
      't.*',
      'p.slug as _slug',
      'p.name as _name',
      db.raw(
        '(SELECT count(*)::int FROM two_factor_backup_codes b WHERE b.user_id = t.user_id AND b.used_at IS NULL) AS _left',
      ),
    );
}

/** 2FA states by user id, batched per event-loop turn and database (without FOR UPDATE). */
const statesByUserSql = compiledOnce((db) => stateQuery(db).whereRaw('t.user_id = ANY(?)', [[]]));
const readStates = turnBatcherByDb(async (db, ids) => {
  const { rows } = await db.raw<{ rows: StateRow[] }>(statesByUserSql(db), [ids]);
  return new Map(rows.map((row) => [String(row.user_id), row]));
});

/**
 * A user's 2FA state. Reads without `forUpdate` are batched per event-loop turn
 * (`turnBatcher`): concurrent status checks share one statement.
 */
export async function twoFactorState(
  db: Knex,
  userId: string,
  opts: { forUpdate?: boolean } = {},
): Promise<TwoFactorState> {
  let r: StateRow | undefined;
  if (opts.forUpdate) {
    r = (await stateQuery(db).where('t.user_id', userId).forUpdate('t').first()) as StateRow | undefined;
  } else {
    r = await readStates(db, userId);
  }
  if (!r) return { row: undefined, platformSlug: null, platformName: null, backupCodesRemaining: 0 };
  const { _slug, _name, _left, ...cols } = r;
  return {
    row: UserTwoFactor.fromDatabaseJson(cols),
    platformSlug: _slug,
    platformName: _name,
    backupCodesRemaining: _left,
  };
}

/** Whether the user has 2FA enabled (sign-in gate). */
export async function twoFactorEnabled(db: Knex, userId: string): Promise<boolean> {
  return !!(await db('user_two_factor').where('user_id', userId).whereNotNull('enabled_at').first('user_id'));
}

/** Where account notices go: the email sign-in's address, else the primary account's, else any verified one. */
export async function noticeAddress(db: Knex, userId: string): Promise<string | null> {
  const row = await db('platform_accounts as pa')
    .join('platforms as p', 'p.id', 'pa.platform_id')
    .join('users as u', 'u.id', 'pa.user_id')
    .where('pa.user_id', userId)
    .whereNotNull('pa.email')
    .orderByRaw("(p.slug = 'email') DESC, (pa.id = u.primary_platform_account_id) DESC, pa.created_at")
    .first('pa.email');
  return row?.email ?? null;
}

/** What makes 2FA required for a user (spec §4.15 requirement): their roles and their sign-in platforms. */
interface RequirementRow {
  user_id: string;
  roles: string[];
  platforms: string[];
  enabled: boolean;
  supported: boolean;
}

/** What the requirement of every user asked for in one turn rests on: one statement, a row per user. */
const requirementInTurn = turnBatcherByDb(async (db, userIds): Promise<Map<string, RequirementRow>> => {
  const r = await db.raw<{ rows: RequirementRow[] }>(
    `SELECT u.id AS user_id,
       COALESCE((SELECT array_agg(r.name ORDER BY r.name) FROM user_roles ur JOIN roles r ON r.id = ur.role_id
                  WHERE ur.user_id = u.id AND r.requires_two_factor), '{}') AS roles,
       COALESCE((SELECT array_agg(DISTINCT p.slug) FROM platform_accounts pa JOIN platforms p ON p.id = pa.platform_id
                  WHERE pa.user_id = u.id AND p.two_factor_required), '{}') AS platforms,
       -- Not EXISTS, which may be planned as one scan of the whole table for a batch (users.ts, viewQuery).
       COALESCE((SELECT true FROM user_two_factor t WHERE t.user_id = u.id AND t.enabled_at IS NOT NULL LIMIT 1), false) AS enabled,
       EXISTS (SELECT 1 FROM platforms p WHERE p.two_factor_supported AND p.enabled) AS supported
     FROM unnest(?::uuid[]) AS u(id)`,
    [userIds],
  );
  return new Map(r.rows.map((row) => [row.user_id, row]));
});

export interface TwoFactorRequirement {
  required: boolean;
  enabled: boolean;
  required_by_roles: string[];
  required_by_platforms: string[];
  can_enable: boolean;
  reason: string;
}

export async function twoFactorRequirement(db: Knex, userId: string): Promise<TwoFactorRequirement> {
  const row = await requirementInTurn(db, userId);
  if (!row) throw new Error(`two-factor requirement: no answer for ${userId}`);
  const { roles, platforms, enabled, supported } = row;
  const required = roles.length > 0 || platforms.length > 0;
  const canEnable = !enabled && supported;
  const why = [
    roles.length
      ? `your role${roles.length > 1 ? 's' : ''} ${roles.join(', ')} require${roles.length > 1 ? '' : 's'} it`
      : '',
    platforms.length ? `sign-in with ${platforms.join(', ')} requires it` : '',
  ]
    .filter(Boolean)
    .join('; ');
  const reason = required
    ? enabled
      ? `two-factor authentication is required (${why}) and enabled`
      : `two-factor authentication is required (${why}): set it up to keep using the account`
    : enabled
      ? 'two-factor authentication is enabled; none of your roles or sign-in platforms requires it'
      : canEnable
        ? 'two-factor authentication is optional: you can enable it'
        : 'no platform supports two-factor authentication';
  return {
    required,
    enabled,
    required_by_roles: roles,
    required_by_platforms: platforms,
    can_enable: canEnable,
    reason,
  };
}
