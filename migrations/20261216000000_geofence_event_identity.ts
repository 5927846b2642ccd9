import type { Knex } from 'knex';

/**
 * One geofence event per fence and point: a point confirms at most one enter or exit of a fence,
 * and the geofence worker writes events with ON CONFLICT DO NOTHING on this key, so a run again
 * after a crash (its worker killed between the state change in Redis and the publish) writes the
 * missing event and never a second one. Duplicates an earlier release may have left (a recording
 * retried after an INSERT that committed late) are removed first, keeping the first written.
 * Points are purged by retention without touching their events (no foreign key): a NULL point id
 * never conflicts. Writes to the table wait for the migration (SHARE lock), so none can slip a
 * duplicate in between the clean-up and the index.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('LOCK TABLE geofence_events IN SHARE MODE');
  await knex.raw(
    `DELETE FROM geofence_events e USING geofence_events d
      WHERE e.gps_point_id IS NOT NULL AND d.geofence_id = e.geofence_id AND d.gps_point_id = e.gps_point_id
        AND (d.created_at, d.id) < (e.created_at, e.id)`,
  );
  await knex.raw(
    'CREATE UNIQUE INDEX IF NOT EXISTS geofence_events_point_unique ON geofence_events (geofence_id, gps_point_id)',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS geofence_events_point_unique');
}
