import test from 'ava';
import { EMAIL_HISTORY_DAYS } from '../../shared/emails/outbox';
import { schedules } from '../../shared/queues';
import { scheduledTasks } from '../../workers/processors/scheduled';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('mails done with are deleted after their retention; queued and younger ones stay', async (t) => {
  const s = stack();
  t.is(schedules.purgeSentEmails, 60 * 60 * 1000);
  const daysAgo = (d: number) => s.db.raw('now() - make_interval(days => ?)', [d]);
  const row = (status: string, age: number) => ({
    to_address: `${status}-${age}@history.test`,
    subject: 'x',
    text_body: 'x',
    status,
    created_at: daysAgo(age),
    deliver_until: daysAgo(age - 1),
  });
  const old = EMAIL_HISTORY_DAYS + 1;
  const young = EMAIL_HISTORY_DAYS - 1;
  await s
    .db('email_outbox')
    .insert([
      row('sent', old),
      row('logged', old),
      row('failed', old),
      row('queued', old),
      row('sent', young),
      row('failed', young),
    ]);
  const result = await scheduledTasks.purgeSentEmails({ db: s.db } as never);
  t.true(result.deleted >= 3);
  const left = await s
    .db('email_outbox')
    .where('to_address', 'like', '%@history.test')
    .orderBy('to_address')
    .pluck('to_address');
  t.deepEqual(left, [`failed-${young}@history.test`, `queued-${old}@history.test`, `sent-${young}@history.test`]);
});
