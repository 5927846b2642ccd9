import type { Knex } from 'knex';
import { EmailOutbox } from '../models/EmailOutbox';
import type { Queues } from '../queues';
import { AccountEmailTemplate, AccountEmailVars, EmailLocale, renderAccountEmail } from './accountEmails';

export interface AccountEmail {
  to: string;
  userId: string | null;
  template: AccountEmailTemplate;
  locale: EmailLocale;
  vars: AccountEmailVars;
}

/**
 * Writes an account email to the outbox (inside the caller's transaction, so the mail exists iff
 * the change commits). Returns the outbox id to hand to `enqueueEmails` after the commit.
 */
export async function writeAccountEmail(trx: Knex | Knex.Transaction, mail: AccountEmail): Promise<string> {
  const { subject, text, html } = renderAccountEmail(mail.template, mail.locale, mail.vars);
  const row = await EmailOutbox.query(trx).insertAndFetch({
    to_address: mail.to,
    subject,
    text_body: text,
    html_body: html,
    template: mail.template,
    user_id: mail.userId,
    status: 'queued',
  });
  return row.id;
}

/** Hands outbox rows to the `email` queue (after the commit); the worker sends them with retries. */
export async function enqueueEmails(queues: Queues, outboxIds: string[]): Promise<void> {
  for (const outboxId of outboxIds) await queues.enqueue('email', { outboxId });
}
