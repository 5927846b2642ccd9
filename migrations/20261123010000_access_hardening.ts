import type { Knex } from 'knex';

/** Tracking reads the default User role held before it became self-service only. */
const USER_ROLE_TRACKING_READS = [
  'gps:read',
  'devices:read',
  'trips:read',
  'locations:read',
  'geofences:read',
  'trip_categories:read',
  'pegel:read',
];

/**
 * Access hardening:
 * - `api_keys.locked`: set when someone other than the owner (an administrator, or the account's
 *   deletion) switches a key off; the owner can then neither switch it back on nor extend it.
 * - the default User role loses the tracking reads: anyone who signs up would otherwise see every
 *   device's live position. Administrators grant them with Developer, API Read Only or own roles.
 */
export async function up(knex: Knex): Promise<void> {
  if (!(await knex.schema.hasColumn('api_keys', 'locked'))) {
    await knex.schema.alterTable('api_keys', (t) => {
      t.boolean('locked').notNullable().defaultTo(false);
    });
  }
  await knex('role_permissions')
    .where('role_id', 'role_user')
    .whereIn(
      'permission_id',
      knex('permissions').select('id').whereRaw("resource || ':' || action = ANY(?)", [USER_ROLE_TRACKING_READS]),
    )
    .delete();
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('api_keys', (t) => {
    t.dropColumn('locked');
  });
}
