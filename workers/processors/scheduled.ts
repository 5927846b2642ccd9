import type { ServiceContext } from '../../shared/context';
import type { ScheduledTask } from '../../shared/queues';
import type { Processor } from './types';
import { cleanupOAuthArtifacts } from '../../shared/commands/oauthProvider';

/** Maintenance tasks by name; each returns a small summary stored as the job's result. */
export const scheduledTasks: Record<ScheduledTask, (ctx: ServiceContext) => Promise<Record<string, number>>> = {
  /** Expired sessions are dead credentials; keep the table small. */
  async cleanupSessions(ctx) {
    const deleted = await ctx.db('sessions').where('expires_at', '<', ctx.db.fn.now()).delete();
    return { deleted };
  },
  /** Expired OAuth codes and tokens are dead weight once a day past expiry. */
  cleanupOAuth: (ctx) => cleanupOAuthArtifacts(ctx.db),
};

export const scheduledProcessor: Processor<'scheduled'> = async (job, ctx) => {
  const task = scheduledTasks[job.data.task];
  if (!task) throw new Error(`unknown scheduled task ${job.data.task}`);
  const result = await task(ctx);
  ctx.logger.info({ task: job.data.task, ...result }, 'scheduled task done');
  return result;
};
