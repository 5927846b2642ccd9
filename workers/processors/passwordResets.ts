import { issuePasswordReset } from '../../shared/commands/emailFlows';
import { claimMailSlotFor } from '../../shared/caches/mailSlots';
import type { ServiceContext } from '../../shared/context';
import type { Processor } from './types';

/** Looks the address up and, when it has an email sign-in, issues the reset token and queues the mail. */
export const passwordResetsProcessor: Processor<'passwordResets'> = async (job, ctx: ServiceContext) => {
  const { email, claimSlot, ...meta } = job.data;
  // Asked for during a Redis outage: the one-mail-a-minute slot is claimed here instead, in the
  // job's name, so a run of this job again (its worker died, or it failed below) finds its own claim.
  if (claimSlot && !(await claimMailSlotFor(ctx.redis, ctx.config, 'reset', email, `job:${job.id}`)))
    return { mailed: false, reason: 'a reset mail went to this address within the minute' };
  return { mailed: await issuePasswordReset(ctx, email, meta) };
};
