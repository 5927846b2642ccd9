import type { Knex } from 'knex';
import { dropInvalid } from './20261128000200_trip_track_covering_index';

/**
 * One geofence event per fence and point: a point confirms at most one enter or exit of a fence,
 * and the geofence worker writes events with ON CONFLICT DO NOTHING on this key, so a run again
 * after a crash (its worker killed between the state change in Redis and the publish) writes the
 * missing event and never a second one. Duplicates an earlier release may have left (a recording
 * retried after an INSERT that committed late) are removed first, keeping the first written.
 * Points are purged by retention without touching their events (no foreign key): a NULL point id
 * never conflicts.
 *
 * The table is never locked for the migration: the duplicates go in batches, and the index is
 * built CONCURRENTLY (outside a transaction), so geofence workers and fence deletions go on. A
 * worker of the earlier release (a rolling deploy) may write a duplicate meanwhile: the build then
 * fails on it, and the clean-up and build run again (a build left invalid is dropped first).
 */
export const config = { transaction: false };

const NAME = 'geofence_events_point_unique';
const BATCH = 5000;

async function removeDuplicates(knex: Knex): Promise<void> {
  for (;;) {
    const { rowCount } = await knex.raw(
      `DELETE FROM geofence_events WHERE id IN (
         SELECT e.id FROM geofence_events e JOIN geofence_events d
           ON d.geofence_id = e.geofence_id AND d.gps_point_id = e.gps_point_id AND (d.created_at, d.id) < (e.created_at, e.id)
          WHERE e.gps_point_id IS NOT NULL
          LIMIT ?::int)`,
      [BATCH],
    );
    if (!rowCount) return;
  }
}

export async function up(knex: Knex): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    await dropInvalid(knex, NAME);
    await removeDuplicates(knex);
    try {
      await knex.raw(
        `CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS ${NAME} ON geofence_events (geofence_id, gps_point_id)`,
      );
      return;
    } catch (err) {
      // unique_violation: a duplicate written during the build.
      if ((err as { code?: string }).code !== '23505' || attempt >= 3) throw err;
    }
  }
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${NAME}`);
}
