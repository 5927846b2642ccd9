import type { Knex } from 'knex';
import { CHAT_BOTS_WS_CHANNEL, EventBus, ServerPush } from '../events';
import type { Logger } from '../logger';

/**
 * The bot events of spec §6 (ChatUserLinked 80, ChatUserUnlinked 81, ChatPermissionChanged 82):
 * published as JSON on the chat bot channel, delivered to chat bot connections as protobuf. A chat
 * account is a platform account of the platform with slug `chat`; its platform_user_id is the chat
 * user's snowflake (`chat_id`). Called from afterCommit hooks: a push that cannot go out is logged,
 * never turned into a failed request.
 */

export const CHAT_PLATFORM_SLUG = 'chat';

interface Services {
  bus: EventBus;
  logger: Logger;
}

async function publish(services: Services, pushes: ServerPush[]): Promise<void> {
  try {
    await services.bus.publishMany(pushes.map((message) => ({ channel: CHAT_BOTS_WS_CHANNEL, message })));
  } catch (err) {
    services.logger.warn({ err: (err as Error).message, pushes: pushes.length }, 'could not publish chat user events');
  }
}

/** A chat account was linked to a user (new account, or an existing user matched by email). */
export function publishChatUserLinked(
  services: Services,
  a: { chatId: string; userId: string; chatUsername: string | null; avatarUrl: string | null },
): Promise<void> {
  return publish(services, [
    {
      type: 'chatUserLinked',
      chatId: a.chatId,
      userId: a.userId,
      chatUsername: a.chatUsername ?? '',
      avatarUrl: a.avatarUrl,
      timestamp: new Date().toISOString(),
    },
  ]);
}

/** A chat account was unlinked from a user. */
export function publishChatUserUnlinked(services: Services, a: { chatId: string; userId: string }): Promise<void> {
  return publish(services, [
    { type: 'chatUserUnlinked', chatId: a.chatId, userId: a.userId, timestamp: new Date().toISOString() },
  ]);
}

/**
 * Users whose effective permissions changed: each of their chat accounts gets a
 * ChatPermissionChanged with the new list, so the bot can gate its commands.
 */
export async function publishChatPermissionChanges(
  services: Services & { db: Knex },
  changed: Array<{ userId: string; permissions: string[] }>,
): Promise<void> {
  if (!changed.length) return;
  let accounts: Array<{ user_id: string; platform_user_id: string }>;
  try {
    accounts = await services
      .db('platform_accounts as pa')
      .join('platforms as p', 'p.id', 'pa.platform_id')
      .where('p.slug', CHAT_PLATFORM_SLUG)
      .whereRaw('pa.user_id = ANY(?::uuid[])', [changed.map((c) => c.userId)])
      .select('pa.user_id', 'pa.platform_user_id');
  } catch (err) {
    services.logger.warn({ err: (err as Error).message }, 'could not read chat accounts for permission events');
    return;
  }
  if (!accounts.length) return;
  const perms = new Map(changed.map((c) => [c.userId, c.permissions]));
  const timestamp = new Date().toISOString();
  await publish(
    services,
    accounts.map((a) => ({
      type: 'chatPermissionChanged',
      chatId: a.platform_user_id,
      userId: a.user_id,
      permissions: perms.get(a.user_id) ?? [],
      timestamp,
    })),
  );
}
