import nodemailer, { Transporter } from 'nodemailer';
import type { ServiceContext } from '../../shared/context';
import { finishedOutboxFields, outboxBodies, outboxMessageId } from '../../shared/emails/outbox';
import { EmailOutbox } from '../../shared/models/EmailOutbox';
import type { Processor } from './types';

let transport: Transporter | undefined;
let transportUrl: string | undefined;

function transporter(url: string): Transporter {
  if (!transport || transportUrl !== url) {
    transport = nodemailer.createTransport(url);
    transportUrl = url;
  }
  return transport;
}

/**
 * Sends one outbox row over SMTP, with the sealed one-time token unsealed into the link only here.
 * Without SMTP_URL the mail is not delivered: the log names recipient, template and subject (never
 * the body: it would carry the token) and the row stays as 'logged'. Failures throw, so BullMQ
 * retries with backoff; the token stays sealed until the row is sent or finally failed. Every attempt
 * for a row carries the same Message-ID (outboxMessageId), so a resend is recognisably one message.
 */
export const emailProcessor: Processor<'email'> = async (job, ctx: ServiceContext) => {
  const mail = await EmailOutbox.query(ctx.db).findById(job.data.outboxId);
  // Done with already (sent, logged or finally failed): a replayed job (the outbox relays at least once) sends nothing.
  if (!mail || mail.status !== 'queued') return { skipped: true };
  if (!ctx.config.smtpUrl) {
    ctx.logger.info(
      { outboxId: mail.id, to: mail.to_address, template: mail.template, subject: mail.subject },
      'email not sent (no SMTP_URL configured)',
    );
    await EmailOutbox.query(ctx.db).patchAndFetchById(mail.id, {
      ...finishedOutboxFields(mail),
      status: 'logged',
      attempts: mail.attempts + 1,
    });
    return { logged: true };
  }
  try {
    const { text, html } = outboxBodies(mail, ctx.config.secretKeys);
    await transporter(ctx.config.smtpUrl).sendMail({
      from: ctx.config.mailFrom,
      messageId: outboxMessageId(mail.id, ctx.config.mailFrom),
      to: mail.to_address,
      subject: mail.subject,
      text,
      ...(html ? { html } : {}),
    });
  } catch (err) {
    const final = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    await EmailOutbox.query(ctx.db).patchAndFetchById(mail.id, {
      ...(final ? finishedOutboxFields(mail) : {}),
      attempts: mail.attempts + 1,
      last_error: (err as Error).message,
      status: final ? 'failed' : 'queued',
    });
    throw err;
  }
  await EmailOutbox.query(ctx.db).patchAndFetchById(mail.id, {
    ...finishedOutboxFields(mail),
    status: 'sent',
    attempts: mail.attempts + 1,
    sent_at: new Date(),
    last_error: null,
  });
  return { sent: true };
};
