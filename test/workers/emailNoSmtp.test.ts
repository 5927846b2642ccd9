import test from 'ava';
import { EmailOutbox } from '../../shared/models/EmailOutbox';
import { useStack } from '../helpers/stack';

const stack = useStack(test, { workers: true });

test('without SMTP_URL mail is logged and kept in the outbox, never dropped', async (t) => {
  const s = stack();
  const mail = await EmailOutbox.query().insertAndFetch({ to_address: 'bob@example.test', subject: 'Hi', text_body: 'body' });
  await s.api.services.queues.enqueue('email', { outboxId: mail.id });
  let row = await EmailOutbox.query().findById(mail.id);
  for (let i = 0; i < 100 && row!.status === 'queued'; i++) {
    await new Promise((r) => setTimeout(r, 50));
    row = await EmailOutbox.query().findById(mail.id);
  }
  t.is(row!.status, 'logged');
  t.is(row!.attempts, 1);
});
