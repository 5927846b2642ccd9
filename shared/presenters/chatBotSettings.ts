import type { ChatSettingsState } from '../commands/chatBotSettings';
import { z } from '../zod';
import { iso } from './iso';

/** ChatSettingsResponse (121) of a successful request; failures are shared/proto/rpc failureReply. */
export const chatSettingsResponseSchema = z.object({
  success: z.literal(true),
  global: z.object({
    id: z.string().uuid(),
    autoSyncEnabled: z.boolean(),
    syncIntervalSeconds: z.number().int(),
    initialDelaySeconds: z.number().int(),
    defaultLanguage: z.string(),
    notifyOnGuildJoin: z.boolean(),
    notifyOnGuildLeave: z.boolean(),
    commandCooldownSeconds: z.number().int(),
    updatedAt: z.string(),
  }),
  guild: z
    .object({ guildId: z.string(), defaultLanguage: z.string().optional(), effectiveLanguage: z.string() })
    .optional(),
});

export function presentChatSettings(s: ChatSettingsState): z.infer<typeof chatSettingsResponseSchema> {
  const g = s.global;
  const out: z.infer<typeof chatSettingsResponseSchema> = {
    success: true,
    global: {
      id: g.public_id,
      autoSyncEnabled: g.auto_sync_enabled,
      syncIntervalSeconds: g.sync_interval_seconds,
      initialDelaySeconds: g.initial_delay_seconds,
      defaultLanguage: g.default_language,
      notifyOnGuildJoin: g.notify_on_guild_join,
      notifyOnGuildLeave: g.notify_on_guild_leave,
      commandCooldownSeconds: g.command_cooldown_seconds,
      updatedAt: iso(g.updated_at),
    },
  };
  if (s.guild) {
    const lang = s.guild.defaultLanguage;
    out.guild = {
      guildId: s.guild.guildId,
      ...(lang ? { defaultLanguage: lang } : {}),
      effectiveLanguage: lang ?? g.default_language,
    };
  }
  return out;
}
