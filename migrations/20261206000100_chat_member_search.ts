import type { Knex } from 'knex';
import { dropInvalid } from './20261128000200_trip_track_covering_index';

/**
 * The member search (GET /v1/chat/guilds/{guild_id}/members?search=, shared/queries/chat.ts) is a
 * case-insensitive substring of the username, global name or nickname: `lower(col) LIKE lower(?)`
 * on each, the expressions of these trigram indexes, so the matches are a bitmap OR of three index
 * probes. ILIKE over the plain columns matched no index and read the whole guild: 176 ms for one
 * search in a guild of 100,000 members, 1.7 ms with these indexes (0.2 ms when nothing matches).
 * Searches of one or two characters hold no trigram; the planner reads the guild for those.
 *
 * Whole indexes, not partial ones on the nullable global name and nickname: the planner takes the
 * statistics of an index expression from whole indexes only, and without them it guessed 4,000
 * matches for any nickname search and walked the guild in display order looking for them (120 ms
 * for a search nothing matched).
 *
 * They need pg_trgm, which 20261124020000_audit_log creates where it can: without it nothing is
 * built and the search reads the guild, as before. Built CONCURRENTLY (outside a transaction), so a
 * member sync is not blocked while a large table is indexed (0.25 s per index at 100,000 members);
 * a build left invalid by an interrupted run is dropped and started again. The indexes add to a
 * sync's writes: inserting 100,000 members took 3.2–4.2 s with them, 1.7–1.8 s without.
 */
export const config = { transaction: false };

const COLUMNS = ['username', 'global_name', 'nickname'];
const indexName = (column: string) => `chat_members_${column}_trgm`;

export async function up(knex: Knex): Promise<void> {
  const { rows } = await knex.raw<{ rows: unknown[] }>("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'");
  if (!rows.length) return;
  for (const column of COLUMNS) {
    await dropInvalid(knex, indexName(column));
    await knex.raw(
      `CREATE INDEX CONCURRENTLY IF NOT EXISTS ${indexName(column)} ON chat_members USING gin (lower(${column}) gin_trgm_ops)`,
    );
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const column of COLUMNS) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${indexName(column)}`);
}
