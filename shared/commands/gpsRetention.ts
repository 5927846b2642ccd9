import type { Knex } from 'knex';
import { readTrackingConfig } from '../caches/trackingConfig';

/**
 * Deletes GPS points older than gps.retention_days that belong to no trip (trip tracks are kept
 * with their trip), in slices so no statement holds locks for long. Returns how many went.
 */
export async function purgeExpiredGpsPoints(db: Knex, sliceSize = 10_000): Promise<{ deleted: number }> {
  const { retentionDays } = await readTrackingConfig(db);
  if (retentionDays === null) return { deleted: 0 };
  let deleted = 0;
  for (;;) {
    const { rowCount } = await db.raw(
      `DELETE FROM gps_points WHERE id IN (
         SELECT id FROM gps_points WHERE trip_id IS NULL AND "timestamp" < now() - make_interval(secs => ? * 86400) LIMIT ?)`,
      [retentionDays, sliceSize],
    );
    deleted += rowCount ?? 0;
    if (!rowCount || rowCount < sliceSize) return { deleted };
  }
}
