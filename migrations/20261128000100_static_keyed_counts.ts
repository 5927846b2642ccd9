import type { Knex } from 'knex';

/**
 * Each keyed row counter (migrations 20261126000000_keyed_row_counters and
 * 20261127000000_chat_member_counter) gets a trigger function of its own, with its column written
 * into static SQL. The shared row_counter_delta_by(prefix, column) had to build its statement with
 * EXECUTE on every INSERT, UPDATE and DELETE, so PostgreSQL parsed and planned it each time; static
 * SQL in PL/pgSQL is planned once per session and trigger. What the triggers write is unchanged:
 * per key, the statement's delta, in key order, zero deltas skipped. Also in
 * shared/queries/counters.ts (KEYED_ROW_COUNTERS).
 */
const SHARDS = 16;

const KEYED: Record<string, { table: string; column: string }> = {
  audit_events_by_user: { table: 'audit_events', column: 'user_id' },
  chat_members_by_guild: { table: 'chat_members', column: 'guild_id' },
};

/** The statement adding the deltas of `source` (rows of k, d) to the counter `name`. */
const upsert = (name: string, source: string) => `
        INSERT INTO row_counters (counter, shard, n)
          SELECT '${name}:' || k::text, pg_backend_pid() % ${SHARDS}, sum(d) FROM (${source}) x
           WHERE k IS NOT NULL GROUP BY k HAVING sum(d) <> 0 ORDER BY k
        ON CONFLICT (counter, shard) DO UPDATE SET n = row_counters.n + EXCLUDED.n;`;

export const functionName = (name: string) => `row_counter_delta_${name}`;

const TRIGGERS = [
  { suffix: 'ins', on: 'INSERT', referencing: 'NEW TABLE AS new_rows' },
  { suffix: 'del', on: 'DELETE', referencing: 'OLD TABLE AS old_rows' },
  { suffix: 'upd', on: 'UPDATE', referencing: 'OLD TABLE AS old_rows NEW TABLE AS new_rows' },
];

/** (Re)creates the insert, delete and update triggers of keyed counter `name` on `table`, calling `call`. */
export async function pointTriggers(knex: Knex, name: string, table: string, call: string): Promise<void> {
  for (const t of TRIGGERS) {
    await knex.raw(`DROP TRIGGER IF EXISTS ${name}_count_${t.suffix} ON ${table}`);
    await knex.raw(
      `CREATE TRIGGER ${name}_count_${t.suffix} AFTER ${t.on} ON ${table} REFERENCING ${t.referencing} FOR EACH STATEMENT EXECUTE FUNCTION ${call}`,
    );
  }
}

/**
 * The trigger function of keyed counter `name` over `column`, in static SQL. Also used by the
 * migrations of later keyed counters (20261207000000_gps_points_by_device).
 */
export const functionSql = (name: string, column: string) => {
  const col = `"${column}"`;
  return `
      CREATE FUNCTION ${functionName(name)}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN ${upsert(name, `SELECT ${col} AS k, 1 AS d FROM new_rows`)}
        ELSIF TG_OP = 'DELETE' THEN ${upsert(name, `SELECT ${col} AS k, -1 AS d FROM old_rows`)}
        ELSE ${upsert(name, `SELECT ${col} AS k, 1 AS d FROM new_rows UNION ALL SELECT ${col}, -1 FROM old_rows`)}
        END IF;
        RETURN NULL;
      END $$`;
};

/**
 * Creates a new keyed counter `name` of `table` per value of `column` in a later migration: its
 * trigger function and triggers (insert, delete, update, truncate) and its values for the rows
 * already there. Writes to the table wait (reads go on) until the migration's transaction ends, so
 * no row is written between the count and the triggers.
 */
export async function createKeyedCounter(knex: Knex, name: string, table: string, column: string): Promise<void> {
  await knex.raw(`LOCK TABLE ${table} IN SHARE ROW EXCLUSIVE MODE`);
  await knex.raw(functionSql(name, column));
  await pointTriggers(knex, name, table, `${functionName(name)}()`);
  await knex.raw(
    `CREATE TRIGGER ${name}_count_trunc AFTER TRUNCATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION row_counter_truncate_by('${name}')`,
  );
  await knex.raw(
    `INSERT INTO row_counters (counter, shard, n)
     SELECT ? || ':' || "${column}"::text, 0, count(*) FROM ${table} WHERE "${column}" IS NOT NULL GROUP BY "${column}"`,
    [name],
  );
}

/** Drops a keyed counter made by `createKeyedCounter`: its triggers, its function and its values. */
export async function dropKeyedCounter(knex: Knex, name: string, table: string): Promise<void> {
  for (const suffix of ['ins', 'del', 'upd', 'trunc'])
    await knex.raw(`DROP TRIGGER IF EXISTS ${name}_count_${suffix} ON ${table}`);
  await knex.raw(`DROP FUNCTION IF EXISTS ${functionName(name)}()`);
  await knex.raw(`DELETE FROM row_counters WHERE counter LIKE ? || ':%'`, [name]);
}

export async function up(knex: Knex): Promise<void> {
  for (const [name, { table, column }] of Object.entries(KEYED)) {
    await knex.raw(functionSql(name, column));
    await pointTriggers(knex, name, table, `${functionName(name)}()`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const [name, { table, column }] of Object.entries(KEYED)) {
    await pointTriggers(knex, name, table, `row_counter_delta_by('${name}', '${column}')`);
    await knex.raw(`DROP FUNCTION IF EXISTS ${functionName(name)}()`);
  }
}
