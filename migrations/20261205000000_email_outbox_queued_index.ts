import type { Knex } from 'knex';

/**
 * The requeue sweep (scheduled every minute) reads the `queued` rows of email_outbox by id. Sent,
 * logged and failed rows are nearly all of the table and never read by it: a partial index on the
 * queued ones keeps the sweep's read as small as the backlog, not the mail history.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw("CREATE INDEX IF NOT EXISTS email_outbox_queued_idx ON email_outbox (id) WHERE status = 'queued'");
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS email_outbox_queued_idx');
}
