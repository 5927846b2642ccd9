import nodemailer, { Transporter } from 'nodemailer';
import type { ServiceContext } from '../../shared/context';
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
 * Sends one outbox row over SMTP. Without SMTP_URL the mail is written to the log and stays in the
 * outbox as 'logged': never silently dropped. Failures throw, so BullMQ retries with backoff.
 */
export const emailProcessor: Processor<'email'> = async (job, ctx: ServiceContext) => {
  const mail = await EmailOutbox.query().findById(job.data.outboxId);
  if (!mail || mail.status === 'sent') return { skipped: true };
  if (!ctx.config.smtpUrl) {
    ctx.logger.info({ to: mail.to_address, subject: mail.subject, template: mail.template, text: mail.text_body }, 'email (no SMTP_URL configured)');
    await EmailOutbox.query().patchAndFetchById(mail.id, { status: 'logged', attempts: mail.attempts + 1 });
    return { logged: true };
  }
  try {
    await transporter(ctx.config.smtpUrl).sendMail({
      from: ctx.config.mailFrom,
      to: mail.to_address,
      subject: mail.subject,
      text: mail.text_body,
      ...(mail.html_body ? { html: mail.html_body } : {}),
    });
  } catch (err) {
    await EmailOutbox.query().patchAndFetchById(mail.id, {
      attempts: mail.attempts + 1,
      last_error: (err as Error).message,
      status: job.attemptsMade + 1 >= (job.opts.attempts ?? 1) ? 'failed' : 'queued',
    });
    throw err;
  }
  await EmailOutbox.query().patchAndFetchById(mail.id, { status: 'sent', attempts: mail.attempts + 1, sent_at: new Date(), last_error: null });
  return { sent: true };
};
