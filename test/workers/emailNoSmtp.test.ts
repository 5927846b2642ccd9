import test from 'ava';
import pino from 'pino';
import { EmailOutbox } from '../../shared/models/EmailOutbox';
import { containsTokenOf } from '../helpers/mailbox';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test, { workers: true });

async function settled(id: string): Promise<EmailOutbox> {
  let row = await EmailOutbox.query().findById(id);
  for (let i = 0; i < 100 && row!.status === 'queued'; i++) {
    await new Promise((r) => setTimeout(r, 50));
    row = await EmailOutbox.query().findById(id);
  }
  return row!;
}

test('without SMTP_URL mail is logged and kept in the outbox, never dropped', async (t) => {
  const s = stack();
  const mail = await EmailOutbox.query().insertAndFetch({
    to_address: 'bob@example.test',
    subject: 'Hi',
    text_body: 'body',
  });
  await s.api.services.queues.enqueue('email', { outboxId: mail.id });
  const row = await settled(mail.id);
  t.is(row.status, 'logged');
  t.is(row.attempts, 1);
});

test('without SMTP_URL the log names recipient, template and subject but never holds the token; neither does the row', async (t) => {
  const s = stack();
  // The workers' log, captured at info level (the stack's own logger is silent).
  const lines: string[] = [];
  s.workers!.ctx.logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
  const user = await createUser(s.db);
  t.is((await s.request('POST', '/v1/auth/reset-password/request', { body: { email: user.email } })).status, 202);
  // The passwordResets job writes the mail after the request was answered.
  let outbox = await s.db('email_outbox').where({ to_address: user.email, template: 'password_reset' }).first();
  for (let i = 0; i < 200 && !outbox; i++) {
    await new Promise((r) => setTimeout(r, 50));
    outbox = await s.db('email_outbox').where({ to_address: user.email, template: 'password_reset' }).first();
  }
  const row = await settled(outbox.id);
  t.is(row.status, 'logged');
  const hashes: string[] = await s
    .db('account_tokens')
    .where({ user_id: user.id, purpose: 'password_reset' })
    .pluck('token_hash');
  t.is(hashes.length, 1);
  const logged = lines.map((l) => JSON.parse(l)).find((l) => l.to === user.email);
  t.like(logged, { template: 'password_reset', subject: 'Reset your password', outboxId: outbox.id });
  t.false(containsTokenOf(lines.join('\n'), hashes));
  t.false(containsTokenOf(JSON.stringify(await s.db('email_outbox').where('id', outbox.id).first()), hashes));
});
