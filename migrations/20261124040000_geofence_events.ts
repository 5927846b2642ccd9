import type { Knex } from 'knex';

/**
 * Geofence event history and debounce: every enter/exit the geofence worker publishes is also a row
 * of geofence_events, and a fence's min_dwell_seconds is how long a new inside/outside state must
 * hold (in GPS time) before it counts, so jitter at the border does not flap.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('geofences', (t) => {
    t.integer('min_dwell_seconds').notNullable().defaultTo(0);
  });
  await knex.raw(
    'ALTER TABLE geofences ADD CONSTRAINT geofences_min_dwell_range CHECK (min_dwell_seconds BETWEEN 0 AND 86400)',
  );
  await knex.schema.createTable('geofence_events', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    // A fence's history goes with it.
    t.uuid('geofence_id').notNullable().references('geofences.id').onDelete('CASCADE');
    // The device identifier of the point (as gps_points.device_id: not a foreign key).
    t.string('device_id', 100).nullable();
    t.string('event', 5).notNullable();
    t.double('distance_km').notNullable();
    t.double('latitude').notNullable();
    t.double('longitude').notNullable();
    // The point that confirmed the change; points are purged by retention, so no foreign key.
    t.uuid('gps_point_id').nullable();
    t.timestamp('occurred_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw("ALTER TABLE geofence_events ADD CONSTRAINT geofence_events_event CHECK (event IN ('enter', 'exit'))");
  await knex.raw('CREATE INDEX geofence_events_fence ON geofence_events (geofence_id, occurred_at DESC, id DESC)');
  await knex.raw(
    'CREATE INDEX geofence_events_device ON geofence_events (device_id, occurred_at DESC, id DESC) WHERE device_id IS NOT NULL',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('geofence_events');
  await knex.raw('ALTER TABLE geofences DROP CONSTRAINT geofences_min_dwell_range');
  await knex.schema.alterTable('geofences', (t) => t.dropColumn('min_dwell_seconds'));
}
