import { UnrecoverableError } from 'bullmq';
import nodemailer, { Transporter } from 'nodemailer';
import type { Config } from '../../shared/config';
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
 * Whether an SMTP failure is final for this mail: a 5xx reply (the server refuses this message or
 * recipient, so a retry gets the same answer). Rejected credentials (EAUTH, also 5xx) are the
 * deployment's problem, not the mail's, and like a refused connection, a timeout or a 4xx reply
 * they are retried.
 */
function isPermanentRejection(err: unknown): boolean {
  const { responseCode, code } = err as { responseCode?: unknown; code?: unknown };
  return typeof responseCode === 'number' && responseCode >= 500 && responseCode < 600 && code !== 'EAUTH';
}

/**
 * BullMQ backoff of the `email` queue (queueDefaults.email): EMAIL_RETRY_DELAY_MS doubling per
 * attempt, capped at EMAIL_RETRY_MAX_DELAY_MS, so an SMTP outage of hours is still retried every
 * few minutes. When to stop is the processor's call (the row's deliver_until), not an attempt count.
 */
export function emailRetryDelay(config: Pick<Config, 'emailRetry'>): (attemptsMade: number) => number {
  const { delayMs, maxDelayMs } = config.emailRetry;
  return (attemptsMade) => Math.min(maxDelayMs, delayMs * 2 ** Math.min(Math.max(attemptsMade - 1, 0), 30));
}

/**
 * Sends one outbox row over SMTP, with the sealed one-time token unsealed into the link only here.
 * Without SMTP_URL the mail is not delivered: the log names recipient, template and subject (never
 * the body: it would carry the token) and the row stays as 'logged'. A transient failure (connection
 * refused, timeout, 4xx) throws, so BullMQ retries with a capped backoff, until the row's
 * deliver_until (its link token's expiry, else 24 h): the row stays 'queued' with its sealed token
 * meanwhile. A 5xx rejection, or a failure past deliver_until, marks the row 'failed' and drops the
 * token. Every attempt for a row carries the same Message-ID (outboxMessageId), so a resend is
 * recognisably one message.
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
  if (mail.deliver_until.getTime() <= Date.now()) {
    // Retried until its link expired (or for 24 h): too late to be of use. The token goes now.
    const lastError = `not delivered before ${mail.deliver_until.toISOString()}; last error: ${mail.last_error ?? 'none'}`;
    await EmailOutbox.query(ctx.db).patchAndFetchById(mail.id, {
      ...finishedOutboxFields(mail),
      status: 'failed',
      last_error: lastError,
    });
    ctx.logger.warn(
      { outboxId: mail.id, template: mail.template, attempts: mail.attempts, deliverUntil: mail.deliver_until },
      'email given up: not delivered in time',
    );
    throw new UnrecoverableError(lastError);
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
    const permanent = isPermanentRejection(err);
    const { code, responseCode } = err as { code?: unknown; responseCode?: unknown };
    await EmailOutbox.query(ctx.db).patchAndFetchById(mail.id, {
      ...(permanent ? finishedOutboxFields(mail) : {}),
      attempts: mail.attempts + 1,
      last_error: (err as Error).message,
      status: permanent ? 'failed' : 'queued',
    });
    // Never the body, the address or the token: which mail, which attempt, what the server said.
    ctx.logger.warn(
      {
        outboxId: mail.id,
        template: mail.template,
        attempt: mail.attempts + 1,
        code,
        responseCode,
        err: (err as Error).message,
        retry: !permanent,
        deliverUntil: mail.deliver_until,
      },
      permanent ? 'email rejected permanently' : 'email delivery failed, will retry',
    );
    if (permanent) throw new UnrecoverableError((err as Error).message);
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
