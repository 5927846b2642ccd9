import type { Knex } from 'knex';
import { dropInvalid } from './20261128000200_trip_track_covering_index';

/**
 * An index led by every foreign key's column. PostgreSQL indexes the referenced key, never the
 * referencing column: deleting a parent row (or changing its key) looks for its children with
 * `WHERE fk = $1`, and without an index that is a scan of the whole child table, inside the
 * deleting transaction. On the bench database (20,000 rows a table) deleting a location took 14–23 ms,
 * 11.5 of them scanning trips and trip_templates for origin_id and destination_id (6.4–7.1 ms with
 * these indexes); deleting a role without holders 5.8–13 ms in user_roles and api_key_roles (2.2–2.5
 * ms); deleting a user spent 6.6 ms in trip_status_history and users. Each scan grows with its child
 * table. A role's holders (shared/queries/access.ts roleHolders, read on every change to a role)
 * were a scan of user_roles too: (role_id, user_id) reads them from the index alone.
 *
 * audit_events.actor_id is no foreign key (an actor may be a bot's external id), but the user purge
 * (shared/commands/userLifecycle.ts purgeUser) clears the user's events by `user_id = ? OR actor_id
 * = ?`: with an index on each side the two are one bitmap OR of two index probes instead of a scan
 * of every event (73 ms at 500,000 events, growing with the log; run once per purged user).
 *
 * A nullable column gets a partial index (`WHERE col IS NOT NULL`): the foreign key's own lookup and
 * every `col = ?` imply it, and rows without the reference (most trips have no category, origin or
 * destination) add no entry. test/shared/foreignKeyIndexes.test.ts fails on any foreign key without
 * such an index.
 *
 * Built CONCURRENTLY (outside a transaction): audit_events and trips are written by most requests,
 * and a plain CREATE INDEX blocks their writes while it reads the table (1.1 s for audit_events'
 * actor_id at 500,000 events). A build left invalid by an interrupted run is dropped and started again.
 */
export const config = { transaction: false };

/** [index name, table, key columns, nullable column the index is partial on]. */
const INDEXES: ReadonlyArray<readonly [string, string, string, string?]> = [
  // Access
  ['user_roles_role_id_user_id_index', 'user_roles', 'role_id, user_id'],
  ['api_key_roles_role_id_index', 'api_key_roles', 'role_id'],
  ['role_permissions_permission_id_index', 'role_permissions', 'permission_id'],
  ['users_primary_platform_account_id_index', 'users', 'primary_platform_account_id', 'primary_platform_account_id'],
  ['user_two_factor_platform_id_index', 'user_two_factor', 'platform_id', 'platform_id'],
  // Tracking
  ['trips_origin_id_index', 'trips', 'origin_id', 'origin_id'],
  ['trips_destination_id_index', 'trips', 'destination_id', 'destination_id'],
  ['trips_category_id_index', 'trips', 'category_id', 'category_id'],
  ['trip_templates_origin_id_index', 'trip_templates', 'origin_id', 'origin_id'],
  ['trip_templates_destination_id_index', 'trip_templates', 'destination_id', 'destination_id'],
  ['trip_templates_category_id_index', 'trip_templates', 'category_id', 'category_id'],
  ['trip_templates_device_id_index', 'trip_templates', 'device_id', 'device_id'],
  ['trip_status_history_changed_by_index', 'trip_status_history', 'changed_by', 'changed_by'],
  // OAuth
  ['oauth_authorization_codes_user_id_index', 'oauth_authorization_codes', 'user_id'],
  ['oauth_refresh_tokens_client_id_index', 'oauth_refresh_tokens', 'client_id'],
  [
    'oauth_refresh_tokens_authorization_code_id_index',
    'oauth_refresh_tokens',
    'authorization_code_id',
    'authorization_code_id',
  ],
  ['oauth_refresh_tokens_parent_id_index', 'oauth_refresh_tokens', 'parent_id', 'parent_id'],
  ['oauth_refresh_tokens_replaced_by_id_index', 'oauth_refresh_tokens', 'replaced_by_id', 'replaced_by_id'],
  ['oauth_access_tokens_client_id_index', 'oauth_access_tokens', 'client_id'],
  ['oauth_access_tokens_refresh_token_id_index', 'oauth_access_tokens', 'refresh_token_id', 'refresh_token_id'],
  // Not a foreign key: the user purge's `actor_id = ?`.
  ['audit_events_actor_id_index', 'audit_events', 'actor_id', 'actor_id'],
];

export async function up(knex: Knex): Promise<void> {
  for (const [name, table, columns, partialOn] of INDEXES) {
    await dropInvalid(knex, name);
    await knex.raw(
      `CREATE INDEX CONCURRENTLY IF NOT EXISTS ${name} ON ${table} (${columns})${partialOn ? ` WHERE ${partialOn} IS NOT NULL` : ''}`,
    );
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const [name] of INDEXES) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
}
