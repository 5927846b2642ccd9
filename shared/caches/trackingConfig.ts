import type { Knex } from 'knex';

/**
 * The tracking entries of system_config (seeded by shared/seed.ts, updated through the settings
 * API). Defaults apply when an entry is missing or holds an unusable value.
 */
export interface TrackingConfig {
  /** gps.latest_cache_seconds: lifetime of the latest-point cache (spec §8: 5 minutes). */
  latestCacheSeconds: number;
  /** gps.retention_days: points older than this and not part of a trip are purged; null keeps all. */
  retentionDays: number | null;
  /** trips.default_gps_logging: gps_logging_enabled of a new trip that does not say (spec: false). */
  defaultGpsLogging: boolean;
}

const KEYS = ['gps.latest_cache_seconds', 'gps.retention_days', 'trips.default_gps_logging'];

/** Reads the tracking configuration now (one query), bypassing the per-process cache. */
export async function readTrackingConfig(db: Knex): Promise<TrackingConfig> {
  const rows: Array<{ key: string; value: unknown }> = await db('system_config')
    .whereIn('key', KEYS)
    .select('key', 'value');
  const v = new Map(rows.map((r) => [r.key, r.value]));
  const ttl = v.get('gps.latest_cache_seconds');
  const retention = v.get('gps.retention_days');
  return {
    latestCacheSeconds: typeof ttl === 'number' && Number.isInteger(ttl) && ttl > 0 ? ttl : 300,
    retentionDays: typeof retention === 'number' && retention > 0 ? retention : null,
    defaultGpsLogging: v.get('trips.default_gps_logging') === true,
  };
}

const MAX_AGE_MS = 30_000;
const cached = new WeakMap<Knex, { at: number; value: Promise<TrackingConfig> }>();

/** The tracking configuration for hot paths: re-read at most every 30 s per process. */
export function trackingConfig(db: Knex): Promise<TrackingConfig> {
  const now = Date.now();
  const hit = cached.get(db);
  if (hit && now - hit.at < MAX_AGE_MS) return hit.value;
  const value = readTrackingConfig(db).catch((err) => {
    cached.delete(db);
    throw err;
  });
  cached.set(db, { at: now, value });
  return value;
}
