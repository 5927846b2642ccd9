import type { Knex } from 'knex';

/**
 * The mail history purge (scheduled every hour) deletes done rows past their retention, oldest
 * first: an index on the creation time of the rows that are no longer queued finds them without
 * reading the whole history.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    "CREATE INDEX IF NOT EXISTS email_outbox_done_created_idx ON email_outbox (created_at) WHERE status <> 'queued'",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS email_outbox_done_created_idx');
}
