import type { Knex } from 'knex';
import type { Config } from '../config';
import { cachedConfig } from '../caches/systemConfig';
import { SYSTEM_CONFIG } from '../systemConfig';

/*
 * Both through the process's config cache (shared/caches/systemConfig.ts): a PATCH reaches every
 * process in the time a Redis message takes, and a sign-in or a deletion reads no system_config row.
 */

/** Lifetime of a session created by a login (system config auth.session_days, default 30 days). */
export async function sessionLifetimeMs(db: Knex): Promise<number> {
  return (await cachedConfig(db, 'auth.session_days')) * 86400_000;
}

/** Grace period before a scheduled deletion is carried out (accounts.deletion_grace_days, default 7). */
export async function deletionGraceMs(db: Knex): Promise<number> {
  return (await cachedConfig(db, 'accounts.deletion_grace_days')) * 86400_000;
}

/**
 * Locales a user may choose: system config auth.supported_locales (seeded with en and de, editable
 * at run time); the SUPPORTED_LOCALES environment variable when that entry is missing or unusable.
 */
export async function supportedLocales(db: Knex, config: Pick<Config, 'supportedLocales'>): Promise<string[]> {
  const row = await db('system_config').where('key', 'auth.supported_locales').first('value');
  const parsed = SYSTEM_CONFIG['auth.supported_locales'].schema.safeParse(row?.value);
  return parsed.success ? parsed.data : config.supportedLocales;
}
