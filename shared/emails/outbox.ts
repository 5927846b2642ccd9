import type { Knex } from 'knex';
import type { Config } from '../config';
import { decryptSecret, encryptSecret, SecretKeys } from '../crypto';
import { EmailOutbox } from '../models/EmailOutbox';
import { writeOutbox } from '../outbox';
import { emailJobId, type Queues } from '../queues';
import { AccountEmailTemplate, AccountEmailVars, emailLink, EmailLocale, renderAccountEmail } from './accountEmails';
import { insertRow } from '../models/AppModel';

export interface AccountEmail {
  to: string;
  userId: string | null;
  template: AccountEmailTemplate;
  locale: EmailLocale;
  /** Everything but the link, which is built here from APP_URL, the template and the token. */
  vars: Omit<AccountEmailVars, 'link'>;
  /** The one-time token the link carries (token mails only). */
  token?: string;
}

/**
 * What stored bodies show where a link's one-time token goes. The token itself is kept only sealed
 * (AES-256-GCM under SECRETS_KEY, column token_sealed) and put into the link when the worker sends
 * the mail, so a reader of email_outbox can never use a pending or sent mail's link.
 */
const TOKEN_PLACEHOLDER = 'REDACTED';

/**
 * Writes an account email to email_outbox and its `email` job to the side-effect outbox, inside the
 * caller's transaction: the mail exists and gets sent iff the change commits, whatever Redis does
 * meanwhile. Call `outbox.wake()` after the commit. Returns the email_outbox id.
 */
export async function writeAccountEmail(
  trx: Knex.Transaction,
  config: Pick<Config, 'appUrl' | 'secretKeys'>,
  mail: AccountEmail,
): Promise<string> {
  const link = emailLink(config.appUrl, mail.template, mail.token ? TOKEN_PLACEHOLDER : undefined);
  const { subject, text, html } = renderAccountEmail(mail.template, mail.locale, { ...mail.vars, link });
  const row = await insertRow(EmailOutbox, trx, {
    to_address: mail.to,
    subject,
    text_body: text,
    html_body: html,
    template: mail.template,
    user_id: mail.userId,
    token_sealed: mail.token ? encryptSecret(mail.token, config.secretKeys) : null,
    // A link is worthless once its token has expired: no delivery is tried after that.
    ...(mail.token && mail.vars.expiresAt ? { deliver_until: mail.vars.expiresAt } : {}),
    status: 'queued',
  });
  await writeOutbox(trx, 'email', { outboxId: row.id });
  return row.id;
}

/** A rendered mail without a link token (notices such as the two-factor alerts), for `writeNoticeEmail`. */
export interface NoticeEmail {
  to: string;
  userId: string | null;
  template: string;
  subject: string;
  text: string;
  html: string;
}

/** Writes a notice mail to email_outbox and its `email` job, inside the caller's transaction (see writeAccountEmail). */
export async function writeNoticeEmail(trx: Knex.Transaction, mail: NoticeEmail): Promise<string> {
  const row = await insertRow(EmailOutbox, trx, {
    to_address: mail.to,
    subject: mail.subject,
    text_body: mail.text,
    html_body: mail.html,
    template: mail.template,
    user_id: mail.userId,
    token_sealed: null,
    status: 'queued',
  });
  await writeOutbox(trx, 'email', { outboxId: row.id });
  return row.id;
}

/** The bodies to send: the stored ones with the sealed token unsealed into the link (throws on a wrong key). */
export function outboxBodies(mail: EmailOutbox, secretsKey: SecretKeys): { text: string; html: string | null } {
  if (!mail.token_sealed) return { text: mail.text_body, html: mail.html_body };
  const token = decryptSecret(mail.token_sealed, secretsKey);
  const fill = (body: string) => body.replaceAll(`token=${TOKEN_PLACEHOLDER}`, () => `token=${token}`);
  return { text: fill(mail.text_body), html: mail.html_body === null ? null : fill(mail.html_body) };
}

/**
 * The Message-ID of an outbox row: `<outbox-<id>@<domain of MAIL_FROM>>`. Delivery is at least once
 * (a worker that dies after the SMTP server accepted a mail but before the row says 'sent' sends it
 * again), so every attempt for one row carries the same id and receivers can recognise a resend as
 * the same message. The domain falls back to `localhost` when MAIL_FROM names none.
 */
export function outboxMessageId(outboxId: string, mailFrom: string): string {
  const address = /<([^>]*)>/.exec(mailFrom)?.[1] ?? mailFrom;
  const domain = address
    .slice(address.lastIndexOf('@') + 1)
    .trim()
    .toLowerCase();
  return `<outbox-${outboxId}@${/^[a-z0-9.-]+$/.test(domain) && address.includes('@') ? domain : 'localhost'}>`;
}

/** Same `token=` values as the migration 20261123000000_outbox_secrets scrubs. */
const TOKEN_PARAM = /\btoken=[A-Za-z0-9_\-%.~]+/g;

/**
 * What an outbox row keeps once it is done with (sent, logged or finally failed): no sealed token,
 * and bodies without any `token=` value. The latter only matters for rows written before tokens
 * were sealed (queued during the upgrade), whose bodies still hold the token in clear.
 */
export function finishedOutboxFields(mail: EmailOutbox): Pick<EmailOutbox, 'token_sealed' | 'text_body' | 'html_body'> {
  const redact = (body: string) => body.replace(TOKEN_PARAM, `token=${TOKEN_PLACEHOLDER}`);
  return {
    token_sealed: null,
    text_body: redact(mail.text_body),
    html_body: mail.html_body === null ? null : redact(mail.html_body),
  };
}

/** BullMQ states in which an `email` job will still run (or is running). */
const LIVE_JOB_STATES = new Set(['waiting', 'delayed', 'active', 'prioritized', 'waiting-children']);

/**
 * The requeue sweep (scheduled task `requeueEmails`): every `queued` email_outbox row whose `email`
 * job will not run again gets a new one. The row is the source of truth and BullMQ only its carrier:
 * a job lost with Redis's data, or one that ran out of attempts (jobs written before retries lasted
 * until deliver_until), would otherwise leave the mail waiting forever. Rows written in the last
 * minute are left to the side-effect relay. A finished job under the
 * row's job id is removed first, or the new one would be deduplicated away. Enqueuing twice is
 * harmless: the job id dedups, and the worker skips a row that is no longer queued. Rows past
 * deliver_until are requeued too: their job marks them failed and drops the token.
 */
export async function requeueStrandedEmails(db: Knex, queues: Queues): Promise<{ queued: number; requeued: number }> {
  const queue = queues.queue('email');
  let queued = 0;
  let requeued = 0;
  let after = '00000000-0000-0000-0000-000000000000';
  for (;;) {
    const ids: string[] = await db('email_outbox')
      .where('status', 'queued')
      // Younger rows are the relay's to hand over (it may be waiting out a Redis outage).
      .where('created_at', '<', db.raw("now() - interval '1 minute'"))
      .where('id', '>', after)
      .orderBy('id')
      .limit(500)
      .pluck('id');
    if (!ids.length) break;
    after = ids[ids.length - 1];
    queued += ids.length;
    for (const outboxId of ids) {
      const job = await queue.getJob(emailJobId(outboxId));
      if (job && LIVE_JOB_STATES.has(await job.getState())) continue;
      // A job that changed state meanwhile stays; the enqueue below is then a no-op (same job id).
      await job?.remove().catch(() => undefined);
      await queues.enqueue('email', { outboxId }, { jobId: emailJobId(outboxId) });
      requeued++;
    }
  }
  return { queued, requeued };
}

/** How long a mail that is done with (sent, logged or failed) is kept: for support, then forgotten. */
export const EMAIL_HISTORY_DAYS = 30;

/**
 * The mail history purge (scheduled task `purgeSentEmails`): rows that are no longer `queued` and
 * older than EMAIL_HISTORY_DAYS are deleted, a batch at a time so no statement holds many locks.
 * They hold an address and the mail's text (links redacted): personal data with no use left.
 */
export async function purgeSentEmails(db: Knex): Promise<{ deleted: number }> {
  let deleted = 0;
  for (;;) {
    const n: number = await db('email_outbox')
      .whereIn(
        'id',
        db('email_outbox')
          .select('id')
          .whereNot('status', 'queued')
          .where('created_at', '<', db.raw('now() - make_interval(hours => ?)', [EMAIL_HISTORY_DAYS * 24]))
          .limit(5000),
      )
      .delete();
    deleted += n;
    if (n < 5000) return { deleted };
  }
}
