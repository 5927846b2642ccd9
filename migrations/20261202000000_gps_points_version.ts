import type { Knex } from 'knex';
import { addVersionTriggers, dropVersionTriggers } from './20261124080000_more_table_versions';

/**
 * A version row (migration 20261124000100_table_versions, sharded by 20261125000000_list_versions)
 * for `gps_points`, so GET /v1/gps/current/devices (the latest point of every device, a read over
 * every device) is answered from the version-checked response cache while no point is written.
 *
 * gps_points is written on the hot path, but only through one INSERT per group commit
 * (shared/groupCommit.ts) or per batch request: the statement-level trigger costs one upsert of a
 * shard row per commit, not per point. While points keep arriving, the cached answer is rebuilt at
 * most once at a time per URL (api/responseCache.ts), as the read was before.
 */
const TABLES = ['gps_points'];

export async function up(knex: Knex): Promise<void> {
  await addVersionTriggers(knex, TABLES);
}

export async function down(knex: Knex): Promise<void> {
  await dropVersionTriggers(knex, TABLES);
}
