import type { Knex } from 'knex';

/**
 * Tracking schema (spec §2): devices, GPS points, trips with their status history, locations and
 * contacts, geofences, trip categories and trip templates.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('devices', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('name', 255).notNullable();
    t.text('description').nullable();
    t.string('device_type', 100).nullable();
    t.boolean('is_active').notNullable().defaultTo(true);
    // A key identifies at most one tracker: unique, and dropping the key just unlinks the device.
    t.uuid('api_key_id').nullable().unique().references('api_keys.id').onDelete('SET NULL');
    t.timestamps(true, true);
    t.index(['name']);
  });

  await knex.schema.createTable('locations', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('name', 255).notNullable();
    t.string('street', 255).nullable();
    t.string('zip', 32).nullable();
    t.string('city', 255).nullable();
    t.string('country', 3).nullable();
    t.double('latitude').nullable();
    t.double('longitude').nullable();
    t.text('notes').nullable();
    t.boolean('is_active').notNullable().defaultTo(true);
    t.timestamps(true, true);
    t.index(['name']);
  });

  await knex.schema.createTable('location_contacts', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('location_id').notNullable().references('locations.id').onDelete('CASCADE');
    t.string('name', 255).notNullable();
    t.string('phone', 64).nullable();
    t.string('email', 320).nullable();
    t.string('role', 255).nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['location_id', 'name']);
  });

  await knex.schema.createTable('trip_categories', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    // Removing a parent lifts its children to the top level instead of deleting them.
    t.uuid('parent_id').nullable().references('trip_categories.id').onDelete('SET NULL');
    t.string('name', 255).notNullable();
    t.text('description').nullable();
    t.string('color', 7).nullable();
    t.boolean('is_active').notNullable().defaultTo(true);
    t.integer('sort_order').notNullable().defaultTo(0);
    t.timestamps(true, true);
    t.index(['parent_id']);
    t.index(['sort_order', 'name']);
  });
  await knex.raw(
    'ALTER TABLE trip_categories ADD CONSTRAINT trip_categories_not_own_parent CHECK (parent_id IS NULL OR parent_id <> id)',
  );

  await knex.schema.createTable('trips', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('name', 255).notNullable();
    t.text('description').nullable();
    t.string('status', 16).notNullable().defaultTo('draft');
    t.boolean('gps_logging_enabled').notNullable().defaultTo(false);
    t.uuid('device_id').nullable().references('devices.id').onDelete('SET NULL');
    t.uuid('category_id').nullable().references('trip_categories.id').onDelete('SET NULL');
    t.uuid('origin_id').nullable().references('locations.id').onDelete('SET NULL');
    t.uuid('destination_id').nullable().references('locations.id').onDelete('SET NULL');
    t.double('weight_kg').nullable();
    t.text('notes').nullable();
    t.specificType('tags', 'text[]').notNullable().defaultTo('{}');
    t.double('start_latitude').nullable();
    t.double('start_longitude').nullable();
    t.double('end_latitude').nullable();
    t.double('end_longitude').nullable();
    t.timestamp('started_at', { useTz: true }).nullable();
    t.timestamp('ended_at', { useTz: true }).nullable();
    t.timestamps(true, true);
    t.index(['status', 'created_at']);
    t.index(['created_at']);
    t.index(['device_id']);
  });
  await knex.raw(
    "ALTER TABLE trips ADD CONSTRAINT trips_status_check CHECK (status IN ('draft', 'active', 'paused', 'completed'))",
  );
  // Spec §3: at most one active GPS-logging trip per device. Enforced here so that two concurrent
  // activations cannot both succeed; the api maps a violation of this index to 409.
  await knex.raw(
    "CREATE UNIQUE INDEX trips_one_active_gps_logging_per_device ON trips (device_id) WHERE status = 'active' AND gps_logging_enabled",
  );

  await knex.schema.createTable('trip_status_history', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('trip_id').notNullable().references('trips.id').onDelete('CASCADE');
    t.string('old_status', 16).notNullable();
    t.string('new_status', 16).notNullable();
    t.uuid('changed_by').nullable().references('users.id').onDelete('SET NULL');
    t.double('latitude').nullable();
    t.double('longitude').nullable();
    t.timestamp('changed_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['trip_id', 'changed_at']);
  });

  await knex.schema.createTable('gps_points', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    // A device identifier string (spec §2): a device's id for linked trackers, or whatever an
    // unlinked tracker reports; deliberately not a foreign key.
    t.string('device_id', 100).nullable();
    t.uuid('trip_id').nullable().references('trips.id').onDelete('SET NULL');
    t.double('latitude').notNullable();
    t.double('longitude').notNullable();
    t.double('altitude').nullable();
    t.double('heading').nullable();
    t.timestamp('timestamp', { useTz: true }).notNullable();
    t.double('speed_kmh').notNullable();
    t.double('speed_mps').notNullable();
    t.double('speed_mph').notNullable();
    t.double('speed_knots').notNullable();
    t.double('pdop').nullable();
    t.double('hdop').nullable();
    t.double('vdop').nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  // Latest point (globally and per device) and the paginated lists all read by timestamp.
  await knex.raw('CREATE INDEX gps_points_timestamp ON gps_points ("timestamp" DESC, created_at DESC, id DESC)');
  await knex.raw(
    'CREATE INDEX gps_points_device_timestamp ON gps_points (device_id, "timestamp" DESC, created_at DESC, id DESC)',
  );
  await knex.raw(
    'CREATE INDEX gps_points_trip_timestamp ON gps_points (trip_id, "timestamp", created_at, id) WHERE trip_id IS NOT NULL',
  );

  await knex.schema.createTable('geofences', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('name', 255).notNullable();
    t.text('description').nullable();
    t.double('latitude').notNullable();
    t.double('longitude').notNullable();
    t.double('radius_km').notNullable();
    t.boolean('is_active').notNullable().defaultTo(true);
    t.jsonb('metadata').nullable();
    t.timestamps(true, true);
    t.index(['name']);
  });
  await knex.raw('ALTER TABLE geofences ADD CONSTRAINT geofences_radius_positive CHECK (radius_km > 0)');

  await knex.schema.createTable('trip_templates', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('name', 255).notNullable();
    t.text('description').nullable();
    t.uuid('category_id').nullable().references('trip_categories.id').onDelete('SET NULL');
    t.uuid('origin_id').nullable().references('locations.id').onDelete('SET NULL');
    t.uuid('destination_id').nullable().references('locations.id').onDelete('SET NULL');
    t.uuid('device_id').nullable().references('devices.id').onDelete('SET NULL');
    t.boolean('gps_logging_enabled').notNullable().defaultTo(false);
    t.double('default_weight_kg').nullable();
    t.text('notes').nullable();
    t.specificType('tags', 'text[]').notNullable().defaultTo('{}');
    t.timestamps(true, true);
    t.index(['name']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    'trip_templates',
    'geofences',
    'gps_points',
    'trip_status_history',
    'trips',
    'trip_categories',
    'location_contacts',
    'locations',
    'devices',
  ]) {
    await knex.schema.dropTableIfExists(table);
  }
}
