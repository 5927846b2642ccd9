import type { Knex } from 'knex';
import type { Config } from '../config';
import { decryptSecret, encryptSecret, SecretKeys } from '../crypto';
import { EmailOutbox } from '../models/EmailOutbox';
import { writeOutbox } from '../outbox';
import { AccountEmailTemplate, AccountEmailVars, emailLink, EmailLocale, renderAccountEmail } from './accountEmails';

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
  config: Pick<Config, 'appUrl' | 'secretsKey'>,
  mail: AccountEmail,
): Promise<string> {
  const link = emailLink(config.appUrl, mail.template, mail.token ? TOKEN_PLACEHOLDER : undefined);
  const { subject, text, html } = renderAccountEmail(mail.template, mail.locale, { ...mail.vars, link });
  const row = await EmailOutbox.query(trx).insertAndFetch({
    to_address: mail.to,
    subject,
    text_body: text,
    html_body: html,
    template: mail.template,
    user_id: mail.userId,
    token_sealed: mail.token ? encryptSecret(mail.token, config.secretsKey) : null,
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
  const row = await EmailOutbox.query(trx).insertAndFetch({
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
