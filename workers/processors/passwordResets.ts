import { issuePasswordReset } from '../../shared/commands/emailFlows';
import { claimMailSlotState } from '../../shared/caches/mailSlots';
import type { ServiceContext } from '../../shared/context';
import type { Processor } from './types';

/** Looks the address up and, when it has an email sign-in, issues the reset token and queues the mail. */
export const passwordResetsProcessor: Processor<'passwordResets'> = async (job, ctx: ServiceContext) => {
  const { email, claimSlot, ...meta } = job.data;
  // Asked for during a Redis outage: the one-mail-a-minute slot is claimed here instead. A retry of
  // this job after a failure below finds its own claim: it mails (at most once, as the token's job).
  if (
    claimSlot &&
    (await claimMailSlotState(ctx.redis, ctx.config, 'reset', email)) === 'taken' &&
    job.attemptsMade === 0
  )
    return { mailed: false, reason: 'a reset mail went to this address within the minute' };
  return { mailed: await issuePasswordReset(ctx, email, meta) };
};
