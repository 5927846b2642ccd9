import { issuePasswordReset } from '../../shared/commands/emailFlows';
import type { ServiceContext } from '../../shared/context';
import type { Processor } from './types';

/** Looks the address up and, when it has an email sign-in, issues the reset token and queues the mail. */
export const passwordResetsProcessor: Processor<'passwordResets'> = async (job, ctx: ServiceContext) => {
  const { email, ...meta } = job.data;
  return { mailed: await issuePasswordReset(ctx, email, meta) };
};
