import type { Knex } from 'knex';

/**
 * Fast paths of the list routes (README "Hot paths").
 *
 * 1. Exact row counters kept by statement-level triggers (`row_counters`), so a paginated list's
 *    `total` is a read of at most 16 small rows instead of a COUNT over the table. Each counter
 *    counts the rows of one table that match a predicate (the list's default filter). A trigger adds
 *    the statement's delta, from its transition tables, to one of 16 shards picked by the backend's
 *    pid, so concurrent writers rarely wait on the same row; the total is the sum of the shards. The
 *    delta is part of the writing transaction, so a statement that reads the counter sees exactly the
 *    rows its snapshot sees.
 * 2. Indexes in the order each list sorts by, so a page is an index range scan, not a sort.
 */

/** name → table and predicate (SQL over the table's columns; `true` for every row). Also in shared/queries/counters.ts. */
const COUNTERS: Record<string, { table: string; where: string }> = {
  users_live: { table: 'users', where: 'deleted_at IS NULL' },
  users_all: { table: 'users', where: 'true' },
  devices: { table: 'devices', where: 'true' },
  gps_points: { table: 'gps_points', where: 'true' },
  geofences: { table: 'geofences', where: 'true' },
  locations: { table: 'locations', where: 'true' },
  trips: { table: 'trips', where: 'true' },
  oauth_clients: { table: 'oauth_clients', where: 'true' },
};

const SHARDS = 16;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE row_counters (
      counter text NOT NULL,
      shard smallint NOT NULL,
      n bigint NOT NULL,
      PRIMARY KEY (counter, shard)
    ) WITH (fillfactor = 50)`);
  // Tiny and updated on every write of the counted tables: vacuum after a fixed number of dead rows.
  await knex.raw(
    'ALTER TABLE row_counters SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000)',
  );
  // TG_ARGV: counter name, predicate. Transition tables are visible to EXECUTE inside the trigger.
  await knex.raw(`
    CREATE FUNCTION row_counter_delta() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      added bigint := 0;
      removed bigint := 0;
    BEGIN
      IF TG_OP IN ('INSERT', 'UPDATE') THEN
        EXECUTE format('SELECT count(*) FROM new_rows WHERE %s', TG_ARGV[1]) INTO added;
      END IF;
      IF TG_OP IN ('DELETE', 'UPDATE') THEN
        EXECUTE format('SELECT count(*) FROM old_rows WHERE %s', TG_ARGV[1]) INTO removed;
      END IF;
      IF added <> removed THEN
        INSERT INTO row_counters (counter, shard, n) VALUES (TG_ARGV[0], pg_backend_pid() % ${SHARDS}, added - removed)
        ON CONFLICT (counter, shard) DO UPDATE SET n = row_counters.n + EXCLUDED.n;
      END IF;
      RETURN NULL;
    END $$`);
  await knex.raw(`
    CREATE FUNCTION row_counter_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE row_counters SET n = 0 WHERE counter = TG_ARGV[0];
      RETURN NULL;
    END $$`);

  for (const [name, { table, where }] of Object.entries(COUNTERS)) {
    const args = `'${name}', '${where.replace(/'/g, "''")}'`;
    await knex.raw(
      `CREATE TRIGGER ${name}_count_ins AFTER INSERT ON ${table} REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counter_delta(${args})`,
    );
    await knex.raw(
      `CREATE TRIGGER ${name}_count_del AFTER DELETE ON ${table} REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counter_delta(${args})`,
    );
    if (where !== 'true')
      await knex.raw(
        `CREATE TRIGGER ${name}_count_upd AFTER UPDATE ON ${table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counter_delta(${args})`,
      );
    await knex.raw(
      `CREATE TRIGGER ${name}_count_trunc AFTER TRUNCATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION row_counter_truncate('${name}')`,
    );
    // The count of the rows already there (the table is locked by the triggers' creation above).
    await knex.raw(`INSERT INTO row_counters (counter, shard, n) SELECT ?, 0, count(*) FROM ${table} WHERE ${where}`, [
      name,
    ]);
  }

  // Sort orders of the lists, so a page is read off an index.
  for (const t of ['devices', 'locations', 'geofences', 'trip_templates'])
    await knex.raw(`CREATE INDEX ${t}_name_order ON ${t} (lower(name), name, id)`);
  await knex.raw('CREATE INDEX trip_categories_order ON trip_categories (sort_order, lower(name), name, id)');
  await knex.raw('CREATE INDEX trips_created_order ON trips (created_at DESC, id DESC)');
  await knex.raw('CREATE INDEX trips_status_created_order ON trips (status, created_at DESC, id DESC)');
  await knex.raw('CREATE INDEX oauth_clients_created_order ON oauth_clients (created_at DESC, id)');
  await knex.raw('CREATE INDEX users_created_order ON users (created_at, id)');
  await knex.raw('CREATE INDEX users_live_created_order ON users (created_at, id) WHERE deleted_at IS NULL');
  await knex.raw('CREATE INDEX api_keys_user_created ON api_keys (user_id, created_at DESC)');
  await knex.raw('CREATE INDEX api_keys_created ON api_keys (created_at DESC)');
}

export async function down(knex: Knex): Promise<void> {
  for (const i of [
    'devices_name_order',
    'locations_name_order',
    'geofences_name_order',
    'trip_templates_name_order',
    'trip_categories_order',
    'trips_created_order',
    'trips_status_created_order',
    'oauth_clients_created_order',
    'users_created_order',
    'users_live_created_order',
    'api_keys_user_created',
    'api_keys_created',
  ])
    await knex.raw(`DROP INDEX IF EXISTS ${i}`);
  for (const [name, { table }] of Object.entries(COUNTERS))
    for (const suffix of ['ins', 'del', 'upd', 'trunc'])
      await knex.raw(`DROP TRIGGER IF EXISTS ${name}_count_${suffix} ON ${table}`);
  await knex.raw('DROP FUNCTION IF EXISTS row_counter_delta()');
  await knex.raw('DROP FUNCTION IF EXISTS row_counter_truncate()');
  await knex.raw('DROP TABLE IF EXISTS row_counters');
}
