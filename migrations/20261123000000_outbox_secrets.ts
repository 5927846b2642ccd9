import type { Knex } from 'knex';

/**
 * One-time tokens leave email_outbox (security finding 14): a new mail's link token is stored only
 * sealed in token_sealed (shared/emails/outbox.ts) and dropped once the mail is done with. Rows
 * written before kept the token in clear in their bodies: those already sent, logged or failed are
 * scrubbed here. Rows still queued keep theirs until the worker sends them, then it scrubs them too.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('email_outbox', (t) => {
    t.text('token_sealed').nullable();
  });
  // The same `token=` values as TOKEN_PARAM in shared/emails/outbox.ts, replaced by its placeholder.
  const scrub = (column: string) =>
    knex.raw(`regexp_replace(??, '\\mtoken=[A-Za-z0-9_.~%-]+', 'token=REDACTED', 'g')`, [column]);
  await knex('email_outbox')
    .whereNot('status', 'queued')
    .where((q) => q.where('text_body', 'like', '%token=%').orWhere('html_body', 'like', '%token=%'))
    .update({ text_body: scrub('text_body'), html_body: scrub('html_body') });
}

/** The sealed tokens cannot go back into bodies; a pending mail's link is lost on the way down. */
export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('email_outbox', (t) => {
    t.dropColumn('token_sealed');
  });
}
