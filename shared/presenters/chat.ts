import {
  avatarUrl,
  channelTypeName,
  displayName,
  formattedUsername,
  guildIconUrl,
  isTextBased,
  isTimedOut,
  isVoice,
} from '../domain/chat';
import type { ChatChannel } from '../models/ChatChannel';
import type { ChatGuild } from '../models/ChatGuild';
import type { ChatMember } from '../models/ChatMember';
import { z } from '../zod';
import { iso } from './iso';

/** Chat guild (spec §2): `id` is the internal UUID, `guild_id` the snowflake. */
export const chatGuildSchema = z
  .object({
    id: z.string().uuid(),
    guild_id: z.string().describe('snowflake'),
    name: z.string(),
    icon: z.string().nullable().describe('icon hash'),
    icon_url: z.string().nullable(),
    owner_id: z.string().nullable(),
    member_count: z.number().int(),
    boost_count: z.number().int(),
    premium_tier: z.number().int().min(0).max(3),
    bot_joined_at: z.string().nullable(),
    last_synced_at: z.string().nullable(),
  })
  .openapi('ChatGuild');

export function presentChatGuild(g: ChatGuild, cdnUrl: string): z.infer<typeof chatGuildSchema> {
  return {
    id: g.id,
    guild_id: g.guild_id,
    name: g.name,
    icon: g.icon,
    icon_url: guildIconUrl(cdnUrl, g.guild_id, g.icon),
    owner_id: g.owner_id,
    member_count: g.member_count,
    boost_count: g.boost_count,
    premium_tier: g.premium_tier,
    bot_joined_at: iso(g.bot_joined_at),
    last_synced_at: iso(g.last_synced_at),
  };
}

/** Chat channel (spec §2): `guild_id` is the guild's snowflake here. */
export const chatChannelSchema = z
  .object({
    id: z.string().uuid(),
    channel_id: z.string(),
    guild_id: z.string().describe('snowflake of the guild'),
    name: z.string(),
    channel_type: z.string().describe('Text, Voice, Category, Announcement, … (spec §2)'),
    channel_type_raw: z.number().int(),
    parent_id: z.string().nullable(),
    position: z.number().int(),
    topic: z.string().nullable(),
    nsfw: z.boolean(),
    is_text_based: z.boolean(),
    is_voice: z.boolean(),
  })
  .openapi('ChatChannel');

export function presentChatChannel(
  c: ChatChannel,
  guild: Pick<ChatGuild, 'guild_id'>,
): z.infer<typeof chatChannelSchema> {
  return {
    id: c.id,
    channel_id: c.channel_id,
    guild_id: guild.guild_id,
    name: c.name,
    channel_type: channelTypeName(c.channel_type_raw),
    channel_type_raw: c.channel_type_raw,
    parent_id: c.parent_id,
    position: c.position,
    topic: c.topic,
    nsfw: c.nsfw,
    is_text_based: isTextBased(c.channel_type_raw),
    is_voice: isVoice(c.channel_type_raw),
  };
}

/** Chat member (spec §2): `guild_id` is the guild's internal UUID, `user_id` the user's snowflake. */
export const chatMemberSchema = z
  .object({
    id: z.string().uuid(),
    guild_id: z.string().uuid(),
    user_id: z.string(),
    username: z.string(),
    discriminator: z.string(),
    global_name: z.string().nullable(),
    nickname: z.string().nullable(),
    avatar: z.string().nullable(),
    avatar_url: z.string().nullable(),
    bot: z.boolean(),
    system: z.boolean(),
    joined_at: z.string().nullable(),
    premium_since: z.string().nullable(),
    deaf: z.boolean(),
    mute: z.boolean(),
    pending: z.boolean(),
    communication_disabled_until: z.string().nullable(),
    roles: z.array(z.string()),
    display_name: z.string(),
    formatted_username: z.string(),
    is_timed_out: z.boolean(),
  })
  .openapi('ChatMember');

export function presentChatMember(m: ChatMember, cdnUrl: string, now = Date.now()): z.infer<typeof chatMemberSchema> {
  return {
    id: m.id,
    guild_id: m.guild_id,
    user_id: m.user_id,
    username: m.username,
    discriminator: m.discriminator,
    global_name: m.global_name,
    nickname: m.nickname,
    avatar: m.avatar,
    avatar_url: avatarUrl(cdnUrl, m.user_id, m.avatar),
    bot: m.bot,
    system: m.system,
    joined_at: iso(m.joined_at),
    premium_since: iso(m.premium_since),
    deaf: m.deaf,
    mute: m.mute,
    pending: m.pending,
    communication_disabled_until: iso(m.communication_disabled_until),
    roles: m.roles ?? [],
    display_name: displayName(m),
    formatted_username: formattedUsername(m),
    is_timed_out: isTimedOut(m.communication_disabled_until, now),
  };
}

/** Chat bot global settings (spec §2). */
export const chatBotSettingsSchema = z
  .object({
    id: z.string().uuid(),
    auto_sync_enabled: z.boolean(),
    sync_interval_seconds: z.number().int(),
    initial_delay_seconds: z.number().int(),
    default_language: z.string(),
    notify_on_guild_join: z.boolean(),
    notify_on_guild_leave: z.boolean(),
    command_cooldown_seconds: z.number().int(),
    updated_at: z.string(),
  })
  .openapi('ChatBotSettings');

export function presentChatBotSettings(g: Record<string, any>): z.infer<typeof chatBotSettingsSchema> {
  return {
    id: g.public_id,
    auto_sync_enabled: g.auto_sync_enabled,
    sync_interval_seconds: g.sync_interval_seconds,
    initial_delay_seconds: g.initial_delay_seconds,
    default_language: g.default_language,
    notify_on_guild_join: g.notify_on_guild_join,
    notify_on_guild_leave: g.notify_on_guild_leave,
    command_cooldown_seconds: g.command_cooldown_seconds,
    updated_at: iso(g.updated_at),
  };
}

/** Chat guild settings (spec §2); `effective_language` is the language the bot uses there. */
export const chatGuildSettingsSchema = z
  .object({
    guild_id: z.string().describe('snowflake'),
    default_language: z.string().nullable().describe('null: the global default applies'),
    effective_language: z.string(),
  })
  .openapi('ChatGuildSettings');

export function presentChatGuildSettings(
  guildId: string,
  language: string | null,
  globalDefault: string,
): z.infer<typeof chatGuildSettingsSchema> {
  return { guild_id: guildId, default_language: language, effective_language: language ?? globalDefault };
}

/** `{success, error, guilds_synced, channels_synced, roles_synced}` of POST /v1/chat/sync. */
export const chatSyncResultSchema = z
  .object({
    success: z.boolean(),
    error: z.string().nullable(),
    guilds_synced: z.number().int(),
    channels_synced: z.number().int(),
    roles_synced: z.number().int(),
  })
  .openapi('ChatSyncResult');

/** `{success, error, members_synced}` of POST /v1/chat/guilds/{guild_id}/members/sync. */
export const chatMemberSyncResultSchema = z
  .object({ success: z.boolean(), error: z.string().nullable(), members_synced: z.number().int() })
  .openapi('ChatMemberSyncResult');
