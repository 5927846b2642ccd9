import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { ServiceContext } from '../context';
import { transaction } from '../db';
import {
  BotChannel,
  botChannel,
  BotGuild,
  botGuild,
  BotMember,
  botMember,
  BotRole,
  botRole,
  parseBotList,
} from '../domain/chatSync';
import { ChatGuild } from '../models/ChatGuild';

/**
 * Chat sync (spec §4.23): asks the chat bot connected to the realtime process what it sees
 * (ChatSyncRequest 110 through ChatBotClient) and stores it: guilds with their channels and roles
 * (one transaction, a fixed number of statements), or one guild's members (one transaction, written in batches). What
 * the bot no longer reports is deleted: rows a sync wrote carry its `sync_id`, the others go.
 * No bot connected, a timeout, a failure the bot reports or an invalid answer → success false and
 * the error, with nothing written.
 */

export interface GuildSyncResult {
  success: boolean;
  error: string | null;
  guilds_synced: number;
  channels_synced: number;
  roles_synced: number;
}

export interface MemberSyncResult {
  success: boolean;
  error: string | null;
  members_synced: number;
}

/** Members per INSERT statement (one JSON parameter each). */
const MEMBER_BATCH = 5000;

const failedGuildSync = (error: string): GuildSyncResult => ({
  success: false,
  error,
  guilds_synced: 0,
  channels_synced: 0,
  roles_synced: 0,
});

const botError = (answer: Record<string, unknown>) =>
  typeof answer.error === 'string' && answer.error ? answer.error : 'the chat bot could not sync';

/** Synchronises every guild of the bot, or only `guildId` (a snowflake). */
export async function syncChatGuilds(
  ctx: Pick<ServiceContext, 'db' | 'chatBot' | 'config' | 'logger'>,
  guildId: string | null,
): Promise<GuildSyncResult> {
  const answer = await ctx.chatBot.call(
    { payload: 'chatSyncRequest', body: { ...(guildId ? { guildId } : {}), scope: 'CHAT_SYNC_SCOPE_GUILDS' } },
    ctx.config.chat.syncTimeoutMs,
  );
  if (!answer.success) return failedGuildSync(botError(answer));
  let guilds, channels: BotChannel[], roles: BotRole[];
  try {
    guilds = parseBotList('guilds', botGuild, answer.guilds);
    channels = parseBotList('channels', botChannel, answer.channels);
    roles = parseBotList('roles', botRole, answer.roles);
  } catch (err) {
    return failedGuildSync(`the chat bot sent an invalid answer: ${(err as Error).message}`);
  }
  if (guildId) guilds = guilds.filter((g) => g.guildId === guildId);
  // A guild reported twice is stored (and counted) once, as channels and roles are.
  guilds = dedupe(guilds, (g) => g.guildId);
  const reported = new Set(guilds.map((g) => g.guildId));

  const result: GuildSyncResult = { success: true, error: null, guilds_synced: 0, channels_synced: 0, roles_synced: 0 };
  // One transaction, one sync at a time: two full syncs written guild by guild interleaved, and
  // each deleted the guilds the other had just written ("no longer reported" by its own answer),
  // leaving a set neither answer had. Now the one that takes the lock second writes its whole
  // answer over the first's.
  const removed = await transaction(ctx.db, async (trx) => {
    await trx.raw('SELECT pg_advisory_xact_lock(hashtext(?))', ['chat.guildSync']);
    // A fixed number of statements whatever the number of guilds (one per guild each, before: a
    // bot in 500 guilds held the lock for 2,500 round trips): the guilds, their channels and their
    // roles each in one statement, then what this sync did not write goes.
    const syncId = randomUUID();
    const ids = await upsertGuilds(trx, guilds);
    const channelRows = dedupe(
      channels.filter((c) => reported.has(c.guildId)),
      (c) => `${c.guildId}\n${c.channelId}`,
    );
    const roleRows = dedupe(
      roles.filter((r) => reported.has(r.guildId)),
      (r) => `${r.guildId}\n${r.roleId}`,
    );
    await upsertChannels(trx, syncId, channelRows);
    await upsertRoles(trx, syncId, roleRows);
    if (ids.length) {
      const idArray = `{${ids.join(',')}}`;
      await trx.raw('DELETE FROM chat_channels WHERE guild_id = ANY(?::uuid[]) AND sync_id IS DISTINCT FROM ?', [
        idArray,
        syncId,
      ]);
      await trx.raw('DELETE FROM chat_roles WHERE guild_id = ANY(?::uuid[]) AND sync_id IS DISTINCT FROM ?', [
        idArray,
        syncId,
      ]);
    }
    result.guilds_synced = guilds.length;
    result.channels_synced = channelRows.length;
    result.roles_synced = roleRows.length;
    // Guilds the bot left: everything on a full sync, the one asked for otherwise.
    const gone = trx('chat_guilds');
    if (guildId) gone.where('guild_id', guildId).whereNotIn('guild_id', [...reported]);
    else if (reported.size) gone.whereNotIn('guild_id', [...reported]);
    return gone.delete();
  });
  ctx.logger.info({ guildId, ...result, removed }, 'chat guilds synced');
  return result;
}

function dedupe<T>(items: T[], key: (t: T) => string): T[] {
  const m = new Map<string, T>();
  for (const it of items) m.set(key(it), it);
  return m.size === items.length ? items : [...m.values()];
}

/**
 * Stores the reported guilds in one statement; answers their row ids. A guild already stored is
 * updated (its bot_joined_at kept when the bot sends none); a new one is inserted (joined now when
 * the bot sends no time). The guild sync's lock keeps other syncs out between the two parts.
 */
async function upsertGuilds(trx: Knex.Transaction, guilds: BotGuild[]): Promise<string[]> {
  if (!guilds.length) return [];
  const { rows } = await trx.raw<{ rows: Array<{ id: string }> }>(
    `WITH x AS (
       SELECT * FROM json_to_recordset(?::json) AS x("guildId" text, name text, icon text, "ownerId" text,
         "memberCount" int, "boostCount" int, "premiumTier" int, "botJoinedAt" timestamptz)
     ), updated AS (
       UPDATE chat_guilds g SET name = x.name, icon = x.icon, owner_id = x."ownerId", member_count = x."memberCount",
         boost_count = x."boostCount", premium_tier = x."premiumTier",
         bot_joined_at = coalesce(x."botJoinedAt", g.bot_joined_at), last_synced_at = now(), updated_at = now()
       FROM x WHERE g.guild_id = x."guildId"
       RETURNING g.id, g.guild_id
     ), inserted AS (
       INSERT INTO chat_guilds (guild_id, name, icon, owner_id, member_count, boost_count, premium_tier,
         bot_joined_at, last_synced_at)
       SELECT x."guildId", x.name, x.icon, x."ownerId", x."memberCount", x."boostCount", x."premiumTier",
         coalesce(x."botJoinedAt", now()), now()
       FROM x WHERE x."guildId" NOT IN (SELECT guild_id FROM updated)
       RETURNING id
     )
     SELECT id FROM updated UNION ALL SELECT id FROM inserted`,
    [
      JSON.stringify(
        guilds.map((g) => ({
          guildId: g.guildId,
          name: g.name,
          icon: g.icon ?? null,
          ownerId: g.ownerId ?? null,
          memberCount: g.memberCount,
          boostCount: g.boostCount,
          premiumTier: g.premiumTier,
          botJoinedAt: g.botJoinedAt ?? null,
        })),
      ),
    ],
  );
  return rows.map((r) => r.id);
}

/** Stores the channels of the stored guilds (by their snowflakes) in one statement. */
async function upsertChannels(trx: Knex.Transaction, syncId: string, rows: BotChannel[]) {
  if (!rows.length) return;
  await trx.raw(
    `INSERT INTO chat_channels (guild_id, channel_id, name, channel_type_raw, parent_id, position, topic, nsfw, sync_id)
     SELECT g.id, x."channelId", x.name, x."channelTypeRaw", x."parentId", x.position, x.topic, x.nsfw, ?::uuid
     FROM json_to_recordset(?::json) AS x("guildId" text, "channelId" text, name text, "channelTypeRaw" int,
       "parentId" text, position int, topic text, nsfw boolean)
     JOIN chat_guilds g ON g.guild_id = x."guildId"
     ON CONFLICT (guild_id, channel_id) DO UPDATE SET name = excluded.name,
       channel_type_raw = excluded.channel_type_raw, parent_id = excluded.parent_id, position = excluded.position,
       topic = excluded.topic, nsfw = excluded.nsfw, sync_id = excluded.sync_id, updated_at = now()`,
    [syncId, JSON.stringify(rows)],
  );
}

/** Stores the roles of the stored guilds (by their snowflakes) in one statement. */
async function upsertRoles(trx: Knex.Transaction, syncId: string, rows: BotRole[]) {
  if (!rows.length) return;
  await trx.raw(
    `INSERT INTO chat_roles (guild_id, role_id, name, position, permissions, color, sync_id)
     SELECT g.id, x."roleId", x.name, x.position, x.permissions, x.color, ?::uuid
     FROM json_to_recordset(?::json) AS x("guildId" text, "roleId" text, name text, position int, permissions text,
       color int)
     JOIN chat_guilds g ON g.guild_id = x."guildId"
     ON CONFLICT (guild_id, role_id) DO UPDATE SET name = excluded.name, position = excluded.position,
       permissions = excluded.permissions, color = excluded.color, sync_id = excluded.sync_id, updated_at = now()`,
    [syncId, JSON.stringify(rows)],
  );
}

async function upsertMembers(trx: Knex.Transaction, guildId: string, syncId: string, rows: BotMember[]) {
  for (let i = 0; i < rows.length; i += MEMBER_BATCH) {
    await trx.raw(
      `INSERT INTO chat_members (guild_id, user_id, username, discriminator, global_name, nickname, avatar, bot,
         system, joined_at, premium_since, deaf, mute, pending, communication_disabled_until, roles, sync_id)
       SELECT ?::uuid, x."userId", x.username, x.discriminator, x."globalName", x.nickname, x.avatar, x.bot,
         x.system, x."joinedAt", x."premiumSince", x.deaf, x.mute, x.pending, x."communicationDisabledUntil",
         coalesce(x.roles, '{}'), ?::uuid
       FROM json_to_recordset(?::json) AS x("userId" text, username text, discriminator text, "globalName" text,
         nickname text, avatar text, bot boolean, system boolean, "joinedAt" timestamptz, "premiumSince" timestamptz,
         deaf boolean, mute boolean, pending boolean, "communicationDisabledUntil" timestamptz, roles text[])
       ON CONFLICT (guild_id, user_id) DO UPDATE SET username = excluded.username,
         discriminator = excluded.discriminator, global_name = excluded.global_name, nickname = excluded.nickname,
         avatar = excluded.avatar, bot = excluded.bot, system = excluded.system, joined_at = excluded.joined_at,
         premium_since = excluded.premium_since, deaf = excluded.deaf, mute = excluded.mute,
         pending = excluded.pending, communication_disabled_until = excluded.communication_disabled_until,
         roles = excluded.roles, sync_id = excluded.sync_id, updated_at = now()`,
      [guildId, syncId, JSON.stringify(rows.slice(i, i + MEMBER_BATCH))],
    );
  }
}

/** Synchronises the members of one synced guild (by its row). */
export async function syncChatMembers(
  ctx: Pick<ServiceContext, 'db' | 'chatBot' | 'config' | 'logger'>,
  guild: Pick<ChatGuild, 'id' | 'guild_id'>,
): Promise<MemberSyncResult> {
  const started = Date.now();
  const answer = await ctx.chatBot.call(
    { payload: 'chatSyncRequest', body: { guildId: guild.guild_id, scope: 'CHAT_SYNC_SCOPE_MEMBERS' } },
    ctx.config.chat.memberSyncTimeoutMs,
  );
  const failed = (error: string): MemberSyncResult => ({ success: false, error, members_synced: 0 });
  if (!answer.success) return failed(botError(answer));
  let members: BotMember[];
  try {
    members = parseBotList('members', botMember, answer.members);
  } catch (err) {
    return failed(`the chat bot sent an invalid answer: ${(err as Error).message}`);
  }
  const rows = dedupe(
    members.filter((m) => !m.guildId || m.guildId === guild.guild_id),
    (m) => m.userId,
  );
  const received = Date.now();
  const syncId = randomUUID();
  const stored = await transaction(ctx.db, async (trx) => {
    // The guild may have been deleted meanwhile; the lock also serialises concurrent member syncs.
    const live = await trx('chat_guilds').where('id', guild.id).forUpdate().first('id');
    if (!live) return false;
    await upsertMembers(trx, guild.id, syncId, rows);
    await trx('chat_members').where('guild_id', guild.id).whereRaw('sync_id IS DISTINCT FROM ?', [syncId]).delete();
    await trx('chat_guilds')
      .where('id', guild.id)
      .update({ member_count: rows.length, members_synced_at: trx.fn.now(), updated_at: trx.fn.now() });
    return true;
  });
  if (!stored) return failed('the guild was deleted during the sync');
  ctx.logger.info(
    { guildId: guild.guild_id, members: rows.length, waitMs: received - started, writeMs: Date.now() - received },
    'chat members synced',
  );
  return { success: true, error: null, members_synced: rows.length };
}
