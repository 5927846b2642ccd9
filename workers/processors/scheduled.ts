import type { ServiceContext } from '../../shared/context';
import type { ScheduledTask } from '../../shared/queues';
import type { Processor } from './types';
import { cleanupOAuthArtifacts } from '../../shared/commands/oauthProvider';
import { expireBans, purgeDeletedAccounts } from '../../shared/commands/userLifecycle';
import { purgeExpiredGpsPoints } from '../../shared/commands/gpsRetention';
import { forgetDeletedGps } from '../../shared/commands/gpsPoints';
import { purgeExpiredAuditEvents } from '../../shared/commands/auditRetention';
import { refreshExpiringIntegrations } from '../../shared/commands/integrationTokens';
import { chatAutoSync } from '../../shared/commands/chatAutoSync';
import { purgeSentEmails, requeueStrandedEmails } from '../../shared/emails/outbox';
import { compactRowCounters } from '../../shared/queries/counters';

/** Maintenance tasks by name; each returns a small summary stored as the job's result. */
export const scheduledTasks: Record<ScheduledTask, (ctx: ServiceContext) => Promise<Record<string, number>>> = {
  /** Expired sessions are dead credentials; keep the table small. */
  async cleanupSessions(ctx) {
    const deleted = await ctx.db('sessions').where('expires_at', '<', ctx.db.fn.now()).delete();
    return { deleted };
  },
  /** Timed bans past expires_at are closed in the history. */
  expireBans: (ctx) => expireBans(ctx),
  /** Accounts whose deletion grace period has ended are purged (and only those). */
  purgeDeletedAccounts: (ctx) => purgeDeletedAccounts(ctx),
  /** Used and expired one-time tokens of the email flows are worthless; keep a day for support. */
  async cleanupAccountTokens(ctx) {
    const deleted = await ctx
      .db('account_tokens')
      .where('expires_at', '<', ctx.db.raw("now() - interval '24 hours'"))
      .delete();
    return { deleted };
  },
  /**
   * Two-factor setups never confirmed within their 10 minutes: the sealed secret is a credential in
   * waiting and is not kept. Enabled rows (enabled_at set) are never touched.
   */
  async cleanupTwoFactorSetups(ctx) {
    const deleted = await ctx
      .db('user_two_factor')
      .whereNull('enabled_at')
      .where('setup_expires_at', '<', ctx.db.fn.now())
      .delete();
    return { deleted };
  },
  /** Expired OAuth codes and tokens are dead weight once a day past expiry. */
  cleanupOAuth: (ctx) => cleanupOAuthArtifacts(ctx.db),
  /**
   * Guessing counters (failed sign-ins, wrong 2FA codes) whose window, cool-down and level have all
   * ended count nothing any more: a row is kept only while it can refuse or count.
   */
  async cleanupAttemptCounters(ctx) {
    const { rowCount } = await ctx.db.raw(
      'DELETE FROM attempt_counters WHERE greatest(expires_at, locked_until, level_expires_at) < now()',
    );
    return { deleted: rowCount ?? 0 };
  },
  /** Row counter rows that together count nothing (a key whose rows are all gone). */
  compactRowCounters: (ctx) => compactRowCounters(ctx.db),
  /** GPS points past gps.retention_days that belong to no trip. */
  purgeGpsPoints: (ctx) => purgeExpiredGpsPoints(ctx.db, undefined, (devices) => forgetDeletedGps(ctx, devices)),
  /** Audit events past audit.retention_days, in batches. */
  purgeAuditEvents: (ctx) => purgeExpiredAuditEvents(ctx.db),
  /** Stream-integration tokens expiring within STREAM_REFRESH_AHEAD_SECONDS are renewed before they lapse. */
  refreshIntegrationTokens: (ctx) => refreshExpiringIntegrations(ctx),
  /** Syncs the chat bot's guilds and members when due (chat bot settings: auto_sync_*, intervals). */
  chatAutoSync: (ctx) => chatAutoSync(ctx),
  /** Queued mails whose job is gone get a new one, so an outage of Redis or SMTP loses none. */
  requeueEmails: (ctx) => requeueStrandedEmails(ctx.db, ctx.queues),
  /** Mails done with for EMAIL_HISTORY_DAYS: their address and text are not kept for good. */
  purgeSentEmails: (ctx) => purgeSentEmails(ctx.db),
};

export const scheduledProcessor: Processor<'scheduled'> = async (job, ctx) => {
  const task = scheduledTasks[job.data.task];
  if (!task) throw new Error(`unknown scheduled task ${job.data.task}`);
  const result = await task(ctx);
  // At info only when it did something: the frequent ticks (chat auto-sync every 15 s, also when it
  // is switched off) would otherwise write thousands of lines a day that say nothing.
  const did = Object.values(result ?? {}).some((v) => (typeof v === 'number' ? v > 0 : Boolean(v)));
  ctx.logger[did ? 'info' : 'debug']({ task: job.data.task, ...result }, 'scheduled task done');
  return result;
};
