import type { ServiceContext } from '../context';
import { pickChatBotInstance } from '../proto/rpc';
import { redisKey, RedisKeys } from '../redis';
import { currentChatSettings } from './chatBotSettings';
import { syncChatGuilds, syncChatMembers } from './chatSync';

/**
 * Scheduled chat auto-sync (the `chatAutoSync` tick of the scheduled queue, every 15 s). Follows
 * the global chat bot settings: nothing while auto_sync_enabled is false or no bot is connected;
 * the first sync `initial_delay_seconds` after a bot is first seen connected, then one every
 * `sync_interval_seconds`. A sync is guilds (channels, roles) and then each guild's members. The
 * state (when the bot was first seen, when the last sync started) is a Redis hash, so any worker
 * may run the tick.
 */
export async function chatAutoSync(
  ctx: Pick<ServiceContext, 'db' | 'redis' | 'config' | 'chatBot' | 'logger'>,
  now = Date.now(),
): Promise<Record<string, number>> {
  const key = redisKey(ctx.config, RedisKeys.chatAutoSync);
  const { global: settings } = await currentChatSettings(ctx.db, null);
  const bot = settings.auto_sync_enabled ? await pickChatBotInstance(ctx.redis, ctx.config) : null;
  if (!bot) {
    // Disabled or no bot: the initial delay starts again when a bot (re)appears.
    await ctx.redis.hdel(key, 'botSeenAt');
    return { synced: 0 };
  }
  const state = await ctx.redis.hgetall(key);
  const botSeenAt = Number(state.botSeenAt) || now;
  if (!state.botSeenAt) await ctx.redis.hset(key, 'botSeenAt', String(botSeenAt));
  const last = Number(state.lastSyncAt) || 0;
  const due =
    last && last >= botSeenAt
      ? now - last >= settings.sync_interval_seconds * 1000
      : now - botSeenAt >= settings.initial_delay_seconds * 1000;
  if (!due) return { synced: 0 };
  // Claimed before the sync, so a tick running meanwhile does not start a second one.
  await ctx.redis.hset(key, 'lastSyncAt', String(now));

  const guilds = await syncChatGuilds(ctx, null);
  if (!guilds.success) {
    ctx.logger.warn({ error: guilds.error }, 'chat auto-sync failed');
    return { synced: 0, failed: 1 };
  }
  let members = 0;
  let failed = 0;
  const rows = await ctx.db('chat_guilds').select('id', 'guild_id');
  for (const g of rows) {
    const r = await syncChatMembers(ctx, g);
    if (r.success) members += r.members_synced;
    else failed++;
  }
  return {
    synced: 1,
    guilds: guilds.guilds_synced,
    channels: guilds.channels_synced,
    roles: guilds.roles_synced,
    members,
    failed,
  };
}
