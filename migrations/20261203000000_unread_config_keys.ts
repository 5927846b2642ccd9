import type { Knex } from 'knex';

/**
 * System config keys that were declared but never read: `export.rate_limit_per_hour`,
 * `export.timeout_seconds` and `ais.enabled`. A PATCH of one answered 200 and changed nothing (the
 * export limits are EXPORT_RATE_LIMIT_PER_HOUR and EXPORT_TIMEOUT_MS, the AIS feed is AIS_FEED_URL,
 * read at start). They are no longer declared; their rows, which GET /v1/system-config would still
 * list, go too.
 */
const GONE = ['export.rate_limit_per_hour', 'export.timeout_seconds', 'ais.enabled'];

export async function up(knex: Knex): Promise<void> {
  await knex('system_config').whereIn('key', GONE).delete();
}

export async function down(knex: Knex): Promise<void> {
  await knex('system_config')
    .insert([
      {
        key: 'export.rate_limit_per_hour',
        value: JSON.stringify(5),
        description: 'Data exports a user may request per hour',
      },
      {
        key: 'export.timeout_seconds',
        value: JSON.stringify(60),
        description: 'Longest a data export may run, in seconds',
      },
      { key: 'ais.enabled', value: JSON.stringify(true), description: 'Ingest the AIS feed when AIS_FEED_URL is set' },
    ])
    .onConflict('key')
    .ignore();
}
