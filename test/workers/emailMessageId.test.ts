import test from 'ava';
import { outboxMessageId } from '../../shared/emails/outbox';
import { EmailOutbox } from '../../shared/models/EmailOutbox';
import { Mailbox, startMailbox } from '../helpers/mailbox';
import { startStack, Stack } from '../helpers/stack';

// The mailbox is shared and `failNext` refuses whichever delivery comes next: the delivery tests run serially.
let box: Mailbox;
let s: Stack;

test.before(async () => {
  box = await startMailbox();
  s = await startStack({ workers: true, env: { SMTP_URL: box.url, MAIL_FROM: 'Service <no-reply@Example.test>' } });
});

test.after.always(async () => {
  await s?.close();
  await box?.close();
});

async function sentRow(id: string): Promise<EmailOutbox> {
  let row = await EmailOutbox.query().findById(id);
  for (let i = 0; i < 200 && row!.status !== 'sent'; i++) {
    await new Promise((r) => setTimeout(r, 50));
    row = await EmailOutbox.query().findById(id);
  }
  return row!;
}

test('the Message-ID is derived from the outbox row and the MAIL_FROM domain', (t) => {
  t.is(outboxMessageId('abc', 'Service <no-reply@Mail.Example.org>'), '<outbox-abc@mail.example.org>');
  t.is(outboxMessageId('abc', 'ops@example.org'), '<outbox-abc@example.org>');
  t.is(outboxMessageId('abc', 'Service <no-reply>'), '<outbox-abc@localhost>');
});

test.serial('a sent mail carries the row Message-ID, and a resend of the same row carries the same one', async (t) => {
  const to = 'message-id@example.test';
  const row = await EmailOutbox.query().insertAndFetch({
    to_address: to,
    subject: 'Stable id',
    text_body: 'hello',
    template: 'test',
  });
  await s.api.services.queues.enqueue('email', { outboxId: row.id });
  const first = await box.waitFor(to);
  t.is(first.messageId, `<outbox-${row.id}@example.test>`);
  t.is((await sentRow(row.id)).status, 'sent');

  // A worker that dies after the SMTP server accepted the mail leaves the row queued, and the job
  // runs again: the same row goes out a second time, under the same Message-ID.
  await EmailOutbox.query().patch({ status: 'queued', sent_at: null }).where('id', row.id);
  await s.api.services.queues.enqueue('email', { outboxId: row.id });
  const second = await box.waitFor(to, (m) => m !== first);
  t.is(second.messageId, first.messageId);
  t.is(box.mails.filter((m) => m.to.includes(to)).length, 2);
  t.is((await sentRow(row.id)).attempts, 2);
});

test.serial('a delivery refused once and retried by the queue carries the same Message-ID', async (t) => {
  const to = 'retried@example.test';
  box.failNext = 1;
  const row = await EmailOutbox.query().insertAndFetch({
    to_address: to,
    subject: 'Retried',
    text_body: 'hello again',
    template: 'test',
  });
  await s.api.services.queues.enqueue('email', { outboxId: row.id });
  const mail = await box.waitFor(to, undefined, 20_000);
  t.is(mail.messageId, `<outbox-${row.id}@example.test>`);
  const sent = await sentRow(row.id);
  t.is(sent.attempts, 2);
});
