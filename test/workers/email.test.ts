import test from 'ava';
import { SMTPServer } from 'smtp-server';
import type { AddressInfo } from 'node:net';
import { EmailOutbox } from '../../shared/models/EmailOutbox';
import { startStack, Stack } from '../helpers/stack';

interface Received {
  to: string[];
  raw: string;
}

const received: Received[] = [];
let smtp: SMTPServer;
let s: Stack;

test.before(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, session, cb) {
      let raw = '';
      stream.on('data', (c) => (raw += c));
      stream.on('end', () => {
        received.push({ to: session.envelope.rcptTo.map((r) => r.address), raw });
        cb();
      });
    },
  });
  await new Promise<void>((r) => smtp.listen(0, '127.0.0.1', r));
  const port = (smtp.server.address() as AddressInfo).port;
  s = await startStack({
    workers: true,
    env: { SMTP_URL: `smtp://127.0.0.1:${port}`, MAIL_FROM: 'Service <no-reply@example.test>' },
  });
});

test.after.always(async () => {
  await s?.close();
  await new Promise<void>((r) => smtp.close(() => r()));
});

test('the email worker sends an outbox row over SMTP and marks it sent', async (t) => {
  const mail = await EmailOutbox.query().insertAndFetch({
    to_address: 'alice@example.test',
    subject: 'Hello',
    text_body: 'Link: http://app/verify?token=abc',
    template: 'test',
  });
  await s.api.services.queues.enqueue('email', { outboxId: mail.id });
  for (let i = 0; i < 100 && !received.length; i++) await new Promise((r) => setTimeout(r, 50));
  t.is(received.length, 1);
  t.deepEqual(received[0].to, ['alice@example.test']);
  t.regex(received[0].raw, /Subject: Hello/);
  t.regex(received[0].raw, /token=abc/);
  let row = await EmailOutbox.query().findById(mail.id);
  for (let i = 0; i < 50 && row!.status !== 'sent'; i++) {
    await new Promise((r) => setTimeout(r, 50));
    row = await EmailOutbox.query().findById(mail.id);
  }
  t.is(row!.status, 'sent');
  t.truthy(row!.sent_at);
  // A body written with a token in clear (before tokens were sealed) does not keep it once sent.
  t.is(row!.text_body, 'Link: http://app/verify?token=REDACTED');
});

test('the scheduled cleanup removes only expired sessions', async (t) => {
  const [u] = await s.db('users').insert({ username: 'cleanup_user' }).returning('id');
  await s.db('sessions').insert([
    { token_hash: 'a'.repeat(64), user_id: u.id, expires_at: new Date(Date.now() - 1000) },
    { token_hash: 'b'.repeat(64), user_id: u.id, expires_at: new Date(Date.now() + 60_000) },
  ]);
  const result = await s.api.services.queues.enqueueAndWait<'scheduled', { deleted: number }>(
    'scheduled',
    { task: 'cleanupSessions' },
    10_000,
  );
  t.true(result.deleted >= 1);
  t.deepEqual(await s.db('sessions').where('user_id', u.id).pluck('token_hash'), ['b'.repeat(64)]);
});
