import type { Knex } from 'knex';

/**
 * Keyed row counters: the rows of a table per value of one column, in `row_counters` as
 * `<prefix>:<value>` (the same 16 shards per counter as migration 20261124000000_list_fast_paths).
 * A statement-level trigger adds each statement's delta per value, from its transition tables, in
 * value order (so two writers lock the counter rows in the same order). A per-parent page
 * (shared/rowLoader.ts pagesOf with `counter`) reads its exact total from here instead of counting
 * the parent's rows, which for a user with a million audit events is a million-row count.
 *
 * The first keyed counter: audit events per user (`audit_events_by_user:<user_id>`), for
 * /v1/users/{id}/audit and /v1/users/me/audit. Also in shared/queries/counters.ts.
 */
const SHARDS = 16;

const KEYED: Record<string, { table: string; column: string }> = {
  audit_events_by_user: { table: 'audit_events', column: 'user_id' },
};

export async function up(knex: Knex): Promise<void> {
  // TG_ARGV: counter prefix, column.
  // TG_ARGV: counter prefix, column. Keys whose delta is zero (an update that kept the key) write nothing.
  await knex.raw(`
    CREATE FUNCTION row_counter_delta_by() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      src text;
    BEGIN
      src := CASE TG_OP
        WHEN 'INSERT' THEN format('SELECT %I AS k, 1 AS d FROM new_rows', TG_ARGV[1])
        WHEN 'DELETE' THEN format('SELECT %I AS k, -1 AS d FROM old_rows', TG_ARGV[1])
        ELSE format('SELECT %I AS k, 1 AS d FROM new_rows UNION ALL SELECT %I, -1 FROM old_rows', TG_ARGV[1], TG_ARGV[1])
      END;
      EXECUTE format(
        'INSERT INTO row_counters (counter, shard, n)
           SELECT %L || '':'' || k::text, pg_backend_pid() %% ${SHARDS}, sum(d) FROM (%s) x
            WHERE k IS NOT NULL GROUP BY k HAVING sum(d) <> 0 ORDER BY k
         ON CONFLICT (counter, shard) DO UPDATE SET n = row_counters.n + EXCLUDED.n',
        TG_ARGV[0], src);
      RETURN NULL;
    END $$`);
  await knex.raw(`
    CREATE FUNCTION row_counter_truncate_by() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM row_counters WHERE counter LIKE TG_ARGV[0] || ':%';
      RETURN NULL;
    END $$`);
  for (const [name, { table, column }] of Object.entries(KEYED)) {
    const args = `'${name}', '${column}'`;
    await knex.raw(
      `CREATE TRIGGER ${name}_count_ins AFTER INSERT ON ${table} REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counter_delta_by(${args})`,
    );
    await knex.raw(
      `CREATE TRIGGER ${name}_count_del AFTER DELETE ON ${table} REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counter_delta_by(${args})`,
    );
    await knex.raw(
      `CREATE TRIGGER ${name}_count_upd AFTER UPDATE ON ${table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counter_delta_by(${args})`,
    );
    await knex.raw(
      `CREATE TRIGGER ${name}_count_trunc AFTER TRUNCATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION row_counter_truncate_by('${name}')`,
    );
    // The rows already there (the table is locked by the triggers' creation above).
    await knex.raw(
      `INSERT INTO row_counters (counter, shard, n)
       SELECT ? || ':' || ${column}::text, 0, count(*) FROM ${table} WHERE ${column} IS NOT NULL GROUP BY ${column}`,
      [name],
    );
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const [name, { table }] of Object.entries(KEYED)) {
    for (const suffix of ['ins', 'del', 'upd', 'trunc'])
      await knex.raw(`DROP TRIGGER IF EXISTS ${name}_count_${suffix} ON ${table}`);
    await knex.raw(`DELETE FROM row_counters WHERE counter LIKE ? || ':%'`, [name]);
  }
  await knex.raw('DROP FUNCTION IF EXISTS row_counter_delta_by()');
  await knex.raw('DROP FUNCTION IF EXISTS row_counter_truncate_by()');
}
