import type { Knex } from 'knex';
import { z, zList } from './zod';
import { LOCALE_TAG } from './config';

/**
 * The system config registry (spec §4.9): every key of `system_config`, with the zod schema a value
 * must satisfy and the default used until an operator changes it. `npm run cli -- seed` inserts the
 * missing keys with their defaults, PATCH /v1/system-config/{key} validates against the schema (400
 * naming `value`), and the service reads values only through `readConfig` / `cachedConfig`, typed by
 * this declaration. A key that is not declared here does not exist (404). How to add one:
 * docs/settings.md.
 */

/** One declared key: its value schema, default and description. */
export interface ConfigEntry<T extends z.ZodTypeAny = z.ZodTypeAny> {
  schema: T;
  default: z.infer<T>;
  description: string;
}

const entry = <T extends z.ZodTypeAny>(schema: T, dflt: z.infer<T>, description: string): ConfigEntry<T> => ({
  schema,
  default: dflt,
  description,
});

const int = (min: number, max: number) =>
  z
    .number({ invalid_type_error: 'must be an integer' })
    .int('must be an integer')
    .min(min, `must be >= ${min}`)
    .max(max, `must be <= ${max}`);
const bool = () => z.boolean({ invalid_type_error: 'must be a boolean' });
const locale = () =>
  z.string({ invalid_type_error: 'must be a string' }).regex(LOCALE_TAG, 'must be a locale tag like en or pt-BR');

export const SYSTEM_CONFIG = {
  'gps.latest_cache_seconds': entry(int(1, 86_400), 300, 'How long the latest GPS point is cached'),
  'gps.retention_days': entry(
    int(0, 36_500),
    365,
    'Days GPS points that belong to no trip are kept (0 keeps them all)',
  ),
  'trips.default_gps_logging': entry(bool(), false, 'Default of gps_logging_enabled for new trips'),
  'geofence.evaluation_enabled': entry(bool(), true, 'Evaluate geofences for incoming GPS points'),
  'auth.session_days': entry(int(1, 3650), 30, 'Lifetime of a session created by login, in days'),
  'auth.supported_locales': entry(
    zList(
      locale(),
      { min: 1, minMessage: 'must not be empty', max: 50 },
      { invalid_type_error: 'must be an array of locale tags' },
    ),
    ['en', 'de'],
    'Locales users may choose',
  ),
  'accounts.deletion_grace_days': entry(int(1, 365), 7, 'Grace period before a scheduled deletion, in days'),
  // Read by clients, not by the service: whether they show a maintenance banner.
  'ui.maintenance_mode': entry(bool(), false, 'Show the maintenance banner in clients'),
  'audit.retention_days': entry(int(0, 36_500), 365, 'Days audit events are kept (0 keeps every event)'),
} satisfies Record<string, ConfigEntry>;

export type SystemConfigKey = keyof typeof SYSTEM_CONFIG;
export type SystemConfigValue<K extends SystemConfigKey> = z.infer<(typeof SYSTEM_CONFIG)[K]['schema']>;

/** Is `key` a declared system config key? */
export function isConfigKey(key: string): key is SystemConfigKey {
  return Object.prototype.hasOwnProperty.call(SYSTEM_CONFIG, key);
}

/** The declared keys with their defaults, as seed rows. */
export function defaultConfigRows(): Array<{ key: string; value: unknown; description: string }> {
  return Object.entries(SYSTEM_CONFIG).map(([key, e]) => ({ key, value: e.default, description: e.description }));
}

/** A stored value checked against its declaration: the default when absent or no longer valid. */
export function configValueOf<K extends SystemConfigKey>(key: K, stored: unknown): SystemConfigValue<K> {
  const e: ConfigEntry = SYSTEM_CONFIG[key];
  if (stored === undefined || stored === null) return e.default as SystemConfigValue<K>;
  const parsed = e.schema.safeParse(stored);
  return (parsed.success ? parsed.data : e.default) as SystemConfigValue<K>;
}

/** Reads declared values now (one query), bypassing the per-process cache. */
export async function readConfigs<K extends SystemConfigKey>(
  db: Knex,
  keys: readonly K[],
): Promise<{ [P in K]: SystemConfigValue<P> }> {
  const rows: Array<{ key: string; value: unknown }> = await db('system_config')
    .whereIn('key', keys as readonly string[])
    .select('key', 'value');
  const stored = new Map(rows.map((r) => [r.key, r.value]));
  const out = {} as { [P in K]: SystemConfigValue<P> };
  for (const k of keys) out[k] = configValueOf(k, stored.get(k)) as (typeof out)[K];
  return out;
}

/** Reads one declared value now, bypassing the per-process cache. */
export async function readConfig<K extends SystemConfigKey>(db: Knex, key: K): Promise<SystemConfigValue<K>> {
  return (await readConfigs(db, [key]))[key];
}
