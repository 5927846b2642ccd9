import type { Knex } from 'knex';
import { functionName, functionSql, pointTriggers } from './20261128000100_static_keyed_counts';

/**
 * A keyed row counter (migration 20261126000000_keyed_row_counters) of trips per status,
 * `trips_by_status:<status>`, so GET /v1/trips?status= and GraphQL `trips(status:)` read their
 * exact total from the counter instead of counting the matching trips on every page (a count that
 * grows with the table: 23 ms at 200,000 trips), and their deep pages are read from the end.
 *
 * Kept like the other keyed counters: a statement-level trigger adds each statement's delta per
 * status, in a trigger function of its own with the column in static SQL (migration
 * 20261128000100_static_keyed_counts). An update that leaves the status alone adds nothing (zero
 * deltas are skipped). Also in shared/queries/counters.ts (KEYED_ROW_COUNTERS).
 */
const NAME = 'trips_by_status';
const TABLE = 'trips';
const COLUMN = 'status';

export async function up(knex: Knex): Promise<void> {
  // Writes wait (reads go on) from here to the end of the migration's transaction, so no trip is
  // written between the count below and the triggers.
  await knex.raw(`LOCK TABLE ${TABLE} IN SHARE ROW EXCLUSIVE MODE`);
  await knex.raw(functionSql(NAME, COLUMN));
  await pointTriggers(knex, NAME, TABLE, `${functionName(NAME)}()`);
  await knex.raw(
    `CREATE TRIGGER ${NAME}_count_trunc AFTER TRUNCATE ON ${TABLE} FOR EACH STATEMENT EXECUTE FUNCTION row_counter_truncate_by('${NAME}')`,
  );
  await knex.raw(
    `INSERT INTO row_counters (counter, shard, n)
     SELECT ? || ':' || ${COLUMN}::text, 0, count(*) FROM ${TABLE} WHERE ${COLUMN} IS NOT NULL GROUP BY ${COLUMN}`,
    [NAME],
  );
}

export async function down(knex: Knex): Promise<void> {
  for (const suffix of ['ins', 'del', 'upd', 'trunc'])
    await knex.raw(`DROP TRIGGER IF EXISTS ${NAME}_count_${suffix} ON ${TABLE}`);
  await knex.raw(`DROP FUNCTION IF EXISTS ${functionName(NAME)}()`);
  await knex.raw(`DELETE FROM row_counters WHERE counter LIKE ? || ':%'`, [NAME]);
}
