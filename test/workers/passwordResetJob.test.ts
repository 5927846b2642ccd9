import test from 'ava';
import { passwordResetsProcessor } from '../../workers/processors/passwordResets';
import { freshEmail } from '../helpers/accounts';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

/** A passwordResets job as BullMQ hands it to the processor. */
const job = (id: string, email: string) =>
  ({
    id,
    attemptsMade: 0,
    data: { email, ipAddress: null, userAgent: null, acceptLanguage: null, claimSlot: true },
  }) as unknown as Parameters<typeof passwordResetsProcessor>[0];

test('a reset asked for during a Redis outage: its job claims the mail slot, and a run of the same job again still mails', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { email: freshEmail('resetjob') });
  const ctx = s.api.services;
  const mails = () => s.db('email_outbox').where({ to_address: user.email.toLowerCase(), template: 'password_reset' });
  t.deepEqual(await passwordResetsProcessor(job('a', user.email), ctx), { mailed: true });
  // The same job run again (its worker died after the claim, before it was marked done; BullMQ
  // hands a stalled job over with attemptsMade still 0): its own claim, so it goes on.
  t.deepEqual(await passwordResetsProcessor(job('a', user.email), ctx), { mailed: true });
  // Another reset of the same outage finds the slot taken: no mail.
  const other = await passwordResetsProcessor(job('b', user.email), ctx);
  t.is((other as { mailed: boolean }).mailed, false);
  t.is((await mails()).length, 2);
});
