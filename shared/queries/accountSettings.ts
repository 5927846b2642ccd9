import type { Knex } from 'knex';
import type { Config } from '../config';

/** Reads one system_config value (seeded, operator-editable); `fallback` when absent or malformed. */
async function configValue<T>(db: Knex, key: string, valid: (v: unknown) => v is T, fallback: T): Promise<T> {
  const row = await db('system_config').where('key', key).first('value');
  return row && valid(row.value) ? row.value : fallback;
}

const positive = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v > 0;
const stringList = (v: unknown): v is string[] =>
  Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string' && x.length > 0);

/** Lifetime of a session created by a login (system config auth.session_days, default 30 days). */
export async function sessionLifetimeMs(db: Knex): Promise<number> {
  return (await configValue(db, 'auth.session_days', positive, 30)) * 86400_000;
}

/** Grace period before a scheduled deletion is carried out (accounts.deletion_grace_days, default 7). */
export async function deletionGraceMs(db: Knex): Promise<number> {
  return (await configValue(db, 'accounts.deletion_grace_days', positive, 7)) * 86400_000;
}

/**
 * Locales a user may choose: system config auth.supported_locales (seeded with en and de, editable
 * at run time); the SUPPORTED_LOCALES environment variable when that entry is missing.
 */
export async function supportedLocales(db: Knex, config: Pick<Config, 'supportedLocales'>): Promise<string[]> {
  return configValue(db, 'auth.supported_locales', stringList, config.supportedLocales);
}
