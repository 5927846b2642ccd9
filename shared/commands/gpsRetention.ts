import type { Knex } from 'knex';
import { readTrackingConfig } from '../caches/trackingConfig';

/**
 * Deletes GPS points older than gps.retention_days that belong to no trip (trip tracks are kept
 * with their trip), in slices so no statement holds locks for long. Returns how many went.
 */
export async function purgeExpiredGpsPoints(
  db: Knex,
  sliceSize = 10_000,
  /** Told the devices whose points went (their cached latest point may be one of them). */
  forget?: (deviceIds: Array<string | null>) => Promise<void>,
): Promise<{ deleted: number }> {
  const { retentionDays } = await readTrackingConfig(db);
  if (retentionDays === null) return { deleted: 0 };
  let deleted = 0;
  for (;;) {
    const { rows } = await db.raw<{ rows: Array<{ device_id: string | null }> }>(
      `DELETE FROM gps_points WHERE id IN (
         SELECT id FROM gps_points WHERE trip_id IS NULL AND "timestamp" < now() - make_interval(secs => ? * 86400) LIMIT ?)
       RETURNING device_id`,
      [retentionDays, sliceSize],
    );
    deleted += rows.length;
    if (rows.length && forget) await forget([...new Set(rows.map((r) => r.device_id))]);
    if (rows.length < sliceSize) return { deleted };
  }
}
