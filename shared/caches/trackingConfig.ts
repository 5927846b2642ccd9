import type { Knex } from 'knex';
import { readConfigs, SystemConfigKey, SystemConfigValue } from '../systemConfig';
import { cachedView } from './systemConfig';

/**
 * The tracking entries of system_config, declared in shared/systemConfig.ts (seeded, updated with
 * PATCH /v1/system-config/{key}). Defaults apply when an entry is missing or holds an unusable value.
 */
export interface TrackingConfig {
  /** gps.latest_cache_seconds: lifetime of the latest-point cache (spec §8: 5 minutes). */
  latestCacheSeconds: number;
  /** gps.retention_days: points older than this and not part of a trip are purged; null keeps all. */
  retentionDays: number | null;
  /** trips.default_gps_logging: gps_logging_enabled of a new trip that does not say (spec: false). */
  defaultGpsLogging: boolean;
}

const KEYS = ['gps.latest_cache_seconds', 'gps.retention_days', 'trips.default_gps_logging'] as const;
type TrackingValues = { [K in (typeof KEYS)[number] & SystemConfigKey]: SystemConfigValue<K> };

function toTrackingConfig(v: TrackingValues): TrackingConfig {
  const retention = v['gps.retention_days'];
  return {
    latestCacheSeconds: v['gps.latest_cache_seconds'],
    retentionDays: retention > 0 ? retention : null,
    defaultGpsLogging: v['trips.default_gps_logging'],
  };
}

/** Reads the tracking configuration now (one query), bypassing the per-process cache. */
export async function readTrackingConfig(db: Knex): Promise<TrackingConfig> {
  return toTrackingConfig(await readConfigs(db, KEYS));
}

/**
 * The tracking configuration for hot paths, through the process's system config cache: a change
 * made with PATCH /v1/system-config reaches it by Redis pub/sub (shared/caches/systemConfig.ts).
 */
export function trackingConfig(db: Knex): Promise<TrackingConfig> {
  return cachedView(db, 'trackingConfig', KEYS, toTrackingConfig);
}
