import { attributed, Attribution, recordAuditEvent } from '../audit';
import type { ServiceContext } from '../context';
import { transaction } from '../db';
import { notFound } from '../errors';
import type { ChatGuild } from '../models/ChatGuild';

/**
 * Forgets a synced guild with its channels, roles and members (spec §4.23 DELETE). Its settings
 * (keyed by the snowflake) stay: if the bot is still in the guild, it reappears at the next sync
 * with the same configuration.
 */
export async function deleteChatGuild(
  ctx: Pick<ServiceContext, 'db'>,
  guild: Pick<ChatGuild, 'id' | 'guild_id' | 'name'>,
  by: Attribution,
): Promise<void> {
  await transaction(ctx.db, async (trx) => {
    // Of concurrent deletes one deletes (and records the event); the others answer 404.
    if ((await trx('chat_guilds').where('id', guild.id).delete()) === 0) throw notFound('guild');
    await recordAuditEvent(
      attributed(by, {
        user_id: by.actorId,
        event_type: 'bot_guild_configured',
        resource_type: 'chat_guild',
        resource_id: guild.guild_id,
        metadata: { action: 'deleted', id: guild.id, name: guild.name },
      }),
      trx,
    );
  });
}
