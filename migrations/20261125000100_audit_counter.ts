import type { Knex } from 'knex';

/**
 * An exact row counter (migration 20261124000000_list_fast_paths) of audit_events, so the admin
 * audit list without filters reads its page and its exact total in one statement instead of a
 * planner estimate, a capped count and the page (shared/queries/audit.ts).
 */
export async function up(knex: Knex): Promise<void> {
  const args = `'audit_events', 'true'`;
  await knex.raw(
    `CREATE TRIGGER audit_events_count_ins AFTER INSERT ON audit_events REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counter_delta(${args})`,
  );
  await knex.raw(
    `CREATE TRIGGER audit_events_count_del AFTER DELETE ON audit_events REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counter_delta(${args})`,
  );
  await knex.raw(
    `CREATE TRIGGER audit_events_count_trunc AFTER TRUNCATE ON audit_events FOR EACH STATEMENT EXECUTE FUNCTION row_counter_truncate('audit_events')`,
  );
  await knex.raw(`INSERT INTO row_counters (counter, shard, n) SELECT 'audit_events', 0, count(*) FROM audit_events`);
}

export async function down(knex: Knex): Promise<void> {
  for (const suffix of ['ins', 'del', 'trunc'])
    await knex.raw(`DROP TRIGGER IF EXISTS audit_events_count_${suffix} ON audit_events`);
  await knex('row_counters').where('counter', 'audit_events').delete();
}
