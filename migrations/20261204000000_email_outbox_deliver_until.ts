import type { Knex } from 'knex';

/**
 * email_outbox.deliver_until: until when a mail whose delivery fails for a transient reason (SMTP
 * down, 4xx) is retried. A link mail is worthless once its token has expired, so writeAccountEmail
 * sets its token's expiry; any other mail (notices) keeps the default of 24 hours after it was written.
 * Rows already there get the same 24 hours from their creation.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('email_outbox', (t) => {
    t.timestamp('deliver_until', { useTz: true }).nullable();
  });
  await knex('email_outbox').update({ deliver_until: knex.raw("created_at + interval '24 hours'") });
  await knex.raw(
    "ALTER TABLE email_outbox ALTER COLUMN deliver_until SET DEFAULT now() + interval '24 hours', ALTER COLUMN deliver_until SET NOT NULL",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('email_outbox', (t) => {
    t.dropColumn('deliver_until');
  });
}
