import type { Knex } from 'knex';
import { dropInvalid } from './20261128000200_trip_track_covering_index';

/**
 * A user's newest session that names a platform, by index: the user view (shared/queries/users.ts,
 * GET /v1/users/{id}/profile, /v1/users/email/{email} and every flattened user) reads the last
 * sign-in platform as `ORDER BY created_at DESC LIMIT 1` over the user's sessions. With only the
 * index on user_id, PostgreSQL fetched and sorted every session of the user on every read: a user
 * with 300 sessions (a script or bot signing in often) made a batch of 14 profiles read about
 * 4,200 session rows, and GET /v1/users/{id}/profile fell from about 15,000 to 3,400–4,200
 * requests a second on the bench database. With this index the newest qualifying session is the
 * first entry: one index entry and one row per user, however many sessions the user has.
 *
 * Built CONCURRENTLY (outside a transaction), so sign-ins go on while it is built; a build left
 * invalid by an interrupted run is dropped and started again.
 */
export const config = { transaction: false };

const NAME = 'sessions_user_platform_recent';

export async function up(knex: Knex): Promise<void> {
  await dropInvalid(knex, NAME);
  await knex.raw(
    `CREATE INDEX CONCURRENTLY IF NOT EXISTS ${NAME} ON sessions (user_id, created_at DESC) WHERE platform_slug IS NOT NULL`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${NAME}`);
}
