import Router from '@koa/router';
import { chatBotSettings, currentChatSettings, guildSettingsView } from '../../shared/commands/chatBotSettings';
import { deleteChatGuild } from '../../shared/commands/chatGuilds';
import { syncChatGuilds, syncChatMembers } from '../../shared/commands/chatSync';
import { SNOWFLAKE } from '../../shared/domain/chat';
import { notFound } from '../../shared/errors';
import { ChatGuild } from '../../shared/models/ChatGuild';
import {
  chatBotSettingsSchema,
  chatChannelSchema,
  chatGuildSchema,
  chatGuildSettingsSchema,
  chatMemberSchema,
  chatMemberSyncResultSchema,
  chatSyncResultSchema,
  presentChatBotSettings,
  presentChatChannel,
  presentChatGuild,
  presentChatGuildSettings,
  presentChatMember,
} from '../../shared/presenters/chat';
import { guildBySnowflake, guildChannels, guildMember, listGuilds, searchMembers } from '../../shared/queries/chat';
import { findOr404 } from '../../shared/rowLoader';
import { atLeastOne, isUuid, z, zChars, zQueryBool, zQueryInt, zUuid } from '../../shared/zod';
import { answerValidUntil } from '../responseCache';
import { listSchema, noContent, resource } from '../responses';
import { AppContext, AppState, defineRoute, requestAttribution } from '../routing';
import type { ApiServices } from '../services';

const zSnowflake = () => z.string().regex(SNOWFLAKE, 'must be a snowflake (digits)');
const snowflakeGuild = z.object({ guild_id: zSnowflake() });
const uuidGuild = z.object({ guild_id: zUuid() });
const eitherGuild = z.object({
  guild_id: z.string().refine((v) => isUuid(v) || SNOWFLAKE.test(v), 'must be a snowflake or a UUID'),
});
const memberParams = z.object({ guild_id: zUuid(), user_id: zSnowflake() });
const ok = z.object({ success: z.boolean() });

const errors = {
  400: { description: 'Invalid input ({error, message} naming the field)' },
  401: { description: 'Not authenticated' },
  403: { description: 'Missing permission' },
  404: { description: 'No such guild' },
};

/** A chat language: checked against the supported locales when the command runs, as the description says. */
const zLanguage = () =>
  zChars({ min: 1, max: 16 }).openapi({
    description:
      'One of the locales users may choose: the auth.supported_locales system config (seeded from SUPPORTED_LOCALES; by default en, de)',
  });

const settingsBody = atLeastOne(
  z.object({
    auto_sync_enabled: z.boolean().optional(),
    sync_interval_seconds: z.number().int().min(60).max(86400).optional(),
    initial_delay_seconds: z.number().int().min(0).max(3600).optional(),
    default_language: zLanguage().optional(),
    notify_on_guild_join: z.boolean().optional(),
    notify_on_guild_leave: z.boolean().optional(),
    command_cooldown_seconds: z.number().int().min(0).max(3600).optional(),
  }),
);

const memberQuery = z.object({
  search: zChars({ trim: true, max: 100 }).optional(),
  bot_only: zQueryBool().default('false'),
  humans_only: zQueryBool().default('false'),
  has_role: zSnowflake().optional(),
  limit: zQueryInt(1, 100).default(50),
  offset: zQueryInt(0, 10_000_000).default(0),
});

const bySnowflake = async (ctx: AppContext, guildId: string) =>
  (await guildBySnowflake(ctx.services.db, guildId)) ?? Promise.reject(notFound('guild'));

/** A guild by either id: its UUID, or its snowflake (routes the spec leaves open). */
const byEither = (ctx: AppContext, guildId: string) =>
  isUuid(guildId) ? findOr404(ChatGuild, guildId, 'guild') : bySnowflake(ctx, guildId);

/** Settings changes made over REST: audited as the caller, pushed to the bot by the command. */
const requester = (ctx: AppContext) => {
  const p = ctx.state.principal;
  return { apiKeyId: p.kind === 'apiKey' ? p.apiKeyId : null, sourceService: null, via: 'rest' as const };
};

/** Chat bot management (spec §4.23). */
export function chatRoutes(router: Router<AppState, { services: ApiServices }>): void {
  const cdn = (ctx: AppContext) => ctx.services.config.chat.cdnUrl;

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/chat/guilds',
      summary: 'List the guilds the chat bot is in',
      tags: ['chat'],
      auth: { permission: 'chat:read' },
      responses: { 200: { description: 'Guilds', schema: listSchema(chatGuildSchema) }, ...errors },
    },
    async (ctx) => {
      const rows = await listGuilds(ctx.services.db);
      ctx.body = resource(
        ctx,
        rows.map((g) => presentChatGuild(g, cdn(ctx))),
      );
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/chat/guilds/:guild_id',
      summary: 'Get a guild by its snowflake (unwrapped)',
      tags: ['chat'],
      auth: { permission: 'chat:read' },
      params: snowflakeGuild,
      responses: { 200: { description: 'Guild', schema: chatGuildSchema }, ...errors },
    },
    async (ctx, { params }) => {
      ctx.body = presentChatGuild(await bySnowflake(ctx, params.guild_id), cdn(ctx));
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/chat/guilds/:guild_id/channels',
      summary: "List a guild's channels",
      description: 'guild_id: the snowflake or the internal UUID.',
      tags: ['chat'],
      auth: { permission: 'chat:read' },
      params: eitherGuild,
      responses: { 200: { description: 'Channels', schema: listSchema(chatChannelSchema) }, ...errors },
    },
    async (ctx, { params }) => {
      const guild = await byEither(ctx, params.guild_id);
      const channels = await guildChannels(ctx.services.db, guild.id);
      ctx.body = resource(
        ctx,
        channels.map((c) => presentChatChannel(c, guild)),
      );
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/chat/guilds/:guild_id/full',
      summary: 'A guild with its channels',
      description: 'guild_id: the snowflake or the internal UUID.',
      tags: ['chat'],
      auth: { permission: 'chat:read' },
      params: eitherGuild,
      responses: {
        200: {
          description: 'Guild and channels',
          schema: z.object({ guild: chatGuildSchema, channels: z.array(chatChannelSchema) }),
        },
        ...errors,
      },
    },
    async (ctx, { params }) => {
      const guild = await byEither(ctx, params.guild_id);
      const channels = await guildChannels(ctx.services.db, guild.id);
      ctx.body = {
        guild: presentChatGuild(guild, cdn(ctx)),
        channels: channels.map((c) => presentChatChannel(c, guild)),
      };
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/chat/sync',
      summary: 'Sync guilds, channels and roles from the connected chat bot',
      description:
        'Asks the chat bot connected to the realtime process and waits for its answer ' +
        '(CHAT_SYNC_TIMEOUT_SECONDS, 30 s). Without a connected bot the answer is success false at once.',
      tags: ['chat'],
      auth: { permission: 'chat:sync' },
      body: z.object({ guild_id: zSnowflake().optional() }),
      responses: { 200: { description: 'Outcome', schema: chatSyncResultSchema }, ...errors },
    },
    async (ctx, { body }) => {
      ctx.body = await syncChatGuilds(ctx.services, body.guild_id ?? null);
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/chat/guilds/:guild_id',
      summary: 'Forget a guild (by its internal UUID)',
      description: 'The guild reappears at the next sync if the bot is still in it; its settings stay.',
      tags: ['chat'],
      auth: { permission: 'chat:delete' },
      params: uuidGuild,
      responses: { 204: { description: 'Deleted' }, ...errors },
    },
    async (ctx, { params }) => {
      const guild = await findOr404(ChatGuild, params.guild_id, 'guild');
      await deleteChatGuild(ctx.services, guild, requestAttribution(ctx));
      noContent(ctx);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/chat/settings',
      summary: 'Global chat bot settings',
      tags: ['chat'],
      auth: { permission: 'chat:read' },
      responses: { 200: { description: 'Settings', schema: chatBotSettingsSchema }, ...errors },
    },
    async (ctx) => {
      ctx.body = presentChatBotSettings((await currentChatSettings(ctx.services.db, null)).global);
    },
  );

  defineRoute(
    router,
    {
      method: 'put',
      path: '/v1/chat/settings',
      summary: 'Change global chat bot settings (pushed to the bot)',
      tags: ['chat'],
      auth: { permission: 'chat:edit' },
      body: settingsBody,
      responses: { 200: { description: 'Saved', schema: ok }, ...errors },
    },
    async (ctx, { body }) => {
      await chatBotSettings(
        ctx.services,
        {
          action: 'CHAT_SETTINGS_UPDATE_GLOBAL',
          globalPatch: {
            autoSyncEnabled: body.auto_sync_enabled,
            syncIntervalSeconds: body.sync_interval_seconds,
            initialDelaySeconds: body.initial_delay_seconds,
            defaultLanguage: body.default_language,
            notifyOnGuildJoin: body.notify_on_guild_join,
            notifyOnGuildLeave: body.notify_on_guild_leave,
            commandCooldownSeconds: body.command_cooldown_seconds,
          },
        },
        requestAttribution(ctx),
        requester(ctx),
      );
      ctx.body = { success: true };
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/chat/guilds/:guild_id/settings',
      summary: "A guild's settings (by snowflake)",
      description: 'default_language null means the global default applies (effective_language).',
      tags: ['chat'],
      auth: { permission: 'chat:read' },
      params: snowflakeGuild,
      responses: { 200: { description: 'Guild settings', schema: chatGuildSettingsSchema }, ...errors },
    },
    async (ctx, { params }) => {
      const view = await guildSettingsView(ctx.services.db, params.guild_id);
      if (!view.known) throw notFound('guild');
      ctx.body = presentChatGuildSettings(params.guild_id, view.defaultLanguage, view.globalLanguage);
    },
  );

  defineRoute(
    router,
    {
      method: 'put',
      path: '/v1/chat/guilds/:guild_id/settings',
      summary: "Set a guild's language (by snowflake; pushed to the bot)",
      tags: ['chat'],
      auth: { permission: 'chat:edit' },
      params: snowflakeGuild,
      body: z.object({ default_language: zLanguage().nullable() }),
      responses: { 200: { description: 'Saved', schema: ok }, ...errors },
    },
    async (ctx, { params, body }) => {
      await bySnowflake(ctx, params.guild_id);
      await chatBotSettings(
        ctx.services,
        {
          action: 'CHAT_SETTINGS_UPDATE_GUILD',
          guildId: params.guild_id,
          guildDefaultLanguage: body.default_language ?? undefined,
        },
        requestAttribution(ctx),
        requester(ctx),
      );
      ctx.body = { success: true };
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/chat/guilds/:guild_id/members',
      summary: "Search a guild's members (by internal guild UUID)",
      description:
        'Without a filter total_count is exact. With one it is exact up to 10,000 matching members; beyond that it is ' +
        "the database planner's estimate and the response carries X-Total-Count-Estimated: true. has_more is always exact.",
      tags: ['chat'],
      auth: { permission: 'chat:read' },
      params: uuidGuild,
      query: memberQuery,
      responses: {
        200: {
          description: 'A page of members by display name',
          schema: z.object({
            members: z.array(chatMemberSchema),
            total_count: z.number().int(),
            has_more: z.boolean(),
          }),
        },
        ...errors,
      },
      // A page says whether each member's timeout is still running: it holds until the first of
      // them ends (answerValidUntil), or until the guild or its members change.
      cacheBy: ['chat_guilds', 'chat_members'],
    },
    async (ctx, { params, query }) => {
      const guild = await findOr404(ChatGuild, params.guild_id, 'guild');
      const page = await searchMembers(ctx.services.db, guild.id, {
        search: query.search || undefined,
        botOnly: query.bot_only,
        humansOnly: query.humans_only,
        hasRole: query.has_role,
        limit: query.limit,
        offset: query.offset,
      });
      for (const m of page.members) {
        const until = m.communication_disabled_until && new Date(m.communication_disabled_until).getTime();
        if (until && until > page.at) answerValidUntil(ctx, until);
      }
      // A filter matching more than MEMBER_COUNT_CAP members: total_count is the planner's estimate.
      if (page.estimated) ctx.set('X-Total-Count-Estimated', 'true');
      ctx.body = {
        members: page.members.map((m) => presentChatMember(m, cdn(ctx), page.at)),
        total_count: page.total,
        has_more: page.hasMore,
      };
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/chat/guilds/:guild_id/members/:user_id',
      summary: 'A member by user snowflake (internal guild UUID; unwrapped)',
      tags: ['chat'],
      auth: { permission: 'chat:read' },
      params: memberParams,
      responses: { 200: { description: 'Member', schema: chatMemberSchema }, ...errors },
    },
    async (ctx, { params }) => {
      const member = await guildMember(ctx.services.db, params.guild_id, params.user_id);
      if (!member) throw notFound('member');
      ctx.body = presentChatMember(member, cdn(ctx));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/chat/guilds/:guild_id/members/sync',
      summary: "Sync a guild's members from the connected chat bot (by snowflake)",
      description:
        'Waits for the bot (CHAT_MEMBER_SYNC_TIMEOUT_SECONDS, 60 s), then replaces the stored members in one ' +
        'transaction. Without a connected bot the answer is success false at once.',
      tags: ['chat'],
      auth: { permission: 'chat:guild.sync' },
      params: snowflakeGuild,
      responses: { 200: { description: 'Outcome', schema: chatMemberSyncResultSchema }, ...errors },
    },
    async (ctx, { params }) => {
      const guild = await bySnowflake(ctx, params.guild_id);
      ctx.body = await syncChatMembers(ctx.services, guild);
    },
  );
}
