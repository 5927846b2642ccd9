import type { Knex } from 'knex';
import { attributed, Attribution, recordAuditEvent, SOURCE_SERVICES } from '../audit';
import type { ServiceContext } from '../context';
import { afterCommit, transaction } from '../db';
import { badRequest } from '../errors';
import { CHAT_BOTS_WS_CHANNEL } from '../events';
import { presentChatSettings } from '../presenters/chatBotSettings';
import { supportedLocales } from '../queries/accountSettings';
import { sharedPerTurn, turnBatcherByDb } from '../rowLoader';

/** ChatSettingsRequest (120) as protobuf decodes it: camelCase, absent fields undefined. */
export interface ChatSettingsRequest {
  action?: string;
  guildId?: string;
  globalPatch?: {
    autoSyncEnabled?: boolean;
    syncIntervalSeconds?: number;
    initialDelaySeconds?: number;
    defaultLanguage?: string;
    notifyOnGuildJoin?: boolean;
    notifyOnGuildLeave?: boolean;
    commandCooldownSeconds?: number;
  };
  guildDefaultLanguage?: string;
}

/** The settings after the request: the global row and, when a guild was named, its own language. */
export interface ChatSettingsState {
  global: Record<string, any>;
  guild: { guildId: string; defaultLanguage: string | null } | null;
}

/** Who asked, beyond the attribution: the API key and the connection's X-Source-Service. */
export interface ChatSettingsRequester {
  apiKeyId: string | null;
  sourceService: string | null;
  /** How the change arrived, for the audit row: `websocket` (default) or `rest`. */
  via?: 'websocket' | 'rest';
}

const SNOWFLAKE = /^\d{1,25}$/;

/** The global row, read once per turn for every request asking. */
const globalRowInTurn = sharedPerTurn((db): Promise<Record<string, any> | undefined> =>
  db('chat_bot_settings').where('id', 1).first(),
);

async function loadGlobal(db: Knex): Promise<Record<string, any>> {
  const row = await globalRowInTurn(db);
  if (row) return row;
  // The migration inserts the row; recreating it keeps a wiped table usable (a read never writes otherwise).
  await db('chat_bot_settings').insert({ id: 1 }).onConflict('id').ignore();
  return db('chat_bot_settings').where('id', 1).first();
}

/** The columns a global patch sets; throws 400 naming the first bad field. */
function globalPatch(p: NonNullable<ChatSettingsRequest['globalPatch']>, locales: string[]): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  const int = (column: string, v: number | undefined, min: number, max: number) => {
    if (v === undefined) return;
    if (!Number.isInteger(v) || v < min || v > max)
      throw badRequest(`${column}: must be an integer from ${min} to ${max}`);
    patch[column] = v;
  };
  int('sync_interval_seconds', p.syncIntervalSeconds, 60, 86400);
  int('initial_delay_seconds', p.initialDelaySeconds, 0, 3600);
  int('command_cooldown_seconds', p.commandCooldownSeconds, 0, 3600);
  if (p.defaultLanguage !== undefined) {
    if (!locales.includes(p.defaultLanguage))
      throw badRequest(`default_language: must be one of ${locales.join(', ')}`);
    patch.default_language = p.defaultLanguage;
  }
  if (p.autoSyncEnabled !== undefined) patch.auto_sync_enabled = p.autoSyncEnabled;
  if (p.notifyOnGuildJoin !== undefined) patch.notify_on_guild_join = p.notifyOnGuildJoin;
  if (p.notifyOnGuildLeave !== undefined) patch.notify_on_guild_leave = p.notifyOnGuildLeave;
  if (Object.keys(patch).length === 0) throw badRequest('global_patch: at least one field is required');
  return patch;
}

/**
 * Chat bot settings over the WebSocket (spec §4.26, 120/121): read the global settings (plus a
 * guild's), patch the global settings, or set a guild's default language (audited as
 * bot_guild_configured). Permissions (chat:read for GET, chat:edit for updates) were checked by
 * the realtime instance. Bad input throws 400 naming the field.
 */
export async function chatBotSettings(
  ctx: Pick<ServiceContext, 'db' | 'config' | 'bus' | 'logger'>,
  r: ChatSettingsRequest,
  by: Attribution,
  requester: ChatSettingsRequester,
): Promise<ChatSettingsState> {
  const { db } = ctx;
  const action = r.action ?? 'CHAT_SETTINGS_GET';
  const guildId = r.guildId || null;
  if (guildId && !SNOWFLAKE.test(guildId)) throw badRequest('guild_id: must be a snowflake (digits)');
  const locales = await supportedLocales(ctx.db, ctx.config);

  const source = requester.sourceService;
  const sourceService = source && (SOURCE_SERVICES as readonly string[]).includes(source) ? source : 'api';
  if (action === 'CHAT_SETTINGS_UPDATE_GLOBAL') {
    const patch = globalPatch(r.globalPatch ?? {}, locales);
    await loadGlobal(db);
    await transaction(db, async (trx) => {
      await trx('chat_bot_settings')
        .where('id', 1)
        .update({ ...patch, updated_at: trx.fn.now() });
      await recordAuditEvent(
        attributed(by, {
          user_id: by.actorId,
          event_type: 'bot_guild_configured',
          resource_type: 'chat_settings',
          resource_id: 'global',
          metadata: { changes: patch, api_key_id: requester.apiKeyId },
          source_service: sourceService,
        }),
        trx,
      );
      afterCommit(trx, () => pushChatSettings(ctx, null));
    });
  } else if (action === 'CHAT_SETTINGS_UPDATE_GUILD') {
    if (!guildId) throw badRequest('guild_id: required');
    const lang = r.guildDefaultLanguage ?? null;
    if (lang !== null && !locales.includes(lang))
      throw badRequest(`default_language: must be one of ${locales.join(', ')}`);
    await transaction(db, async (trx) => {
      await trx('chat_guild_settings')
        .insert({ guild_id: guildId, default_language: lang })
        .onConflict('guild_id')
        .merge({ default_language: lang, updated_at: trx.fn.now() });
      await recordAuditEvent(
        attributed(by, {
          // The requester's own user (null for the system key): the actor is the account configured for.
          user_id: by.actorId,
          event_type: 'bot_guild_configured',
          resource_type: 'chat_guild',
          resource_id: guildId,
          metadata: { default_language: lang, via: requester.via ?? 'websocket', api_key_id: requester.apiKeyId },
          source_service: sourceService,
        }),
        trx,
      );
      afterCommit(trx, () => pushChatSettings(ctx, guildId));
    });
  } else if (action !== 'CHAT_SETTINGS_GET') {
    throw badRequest(`action: unknown action ${action}`);
  }

  return currentChatSettings(db, guildId);
}

/** The global settings and, when `guildId` is given, that guild's own language. */
export async function currentChatSettings(db: Knex, guildId: string | null): Promise<ChatSettingsState> {
  const global = await loadGlobal(db);
  if (!guildId) return { global, guild: null };
  const g = await db('chat_guild_settings').where('guild_id', guildId).first();
  return { global, guild: { guildId, defaultLanguage: g?.default_language ?? null } };
}

/**
 * A guild's settings as GET /v1/chat/guilds/{guild_id}/settings shows them, in two statements: the
 * global row, and whether the guild is known (synced, or has settings of its own) with its language.
 */
export async function guildSettingsView(
  db: Knex,
  guildId: string,
): Promise<{ known: boolean; defaultLanguage: string | null; globalLanguage: string }> {
  const [global, view] = await Promise.all([loadGlobal(db), guildViewInTurn(db, guildId)]);
  return { known: view!.known, defaultLanguage: view!.lang, globalLanguage: global.default_language };
}

/** Whether each guild asked for in one turn is known, and its own language: one statement. */
const guildViewInTurn = turnBatcherByDb(async (db, guildIds) => {
  const { rows } = await db.raw<{ rows: Array<{ guild_id: string; known: boolean; lang: string | null }> }>(
    `SELECT k.id AS guild_id,
            -- Not EXISTS, which may be planned as one scan of the whole table for a batch (users.ts, viewQuery).
            (SELECT true FROM chat_guilds WHERE guild_id = k.id LIMIT 1) IS NOT NULL OR s.guild_id IS NOT NULL AS known,
            s.default_language AS lang
       FROM unnest(?::text[]) AS k(id) LEFT JOIN chat_guild_settings s ON s.guild_id = k.id`,
    [guildIds],
  );
  return new Map(rows.map((r) => [r.guild_id, r]));
});

/**
 * Tells the connected chat bots the settings changed: an unsolicited ChatSettingsResponse (121,
 * empty request_id) with the current global settings and the changed guild's, on the bot channel.
 * A push that cannot go out is logged; the bot also reads the settings with a 120 request.
 */
export async function pushChatSettings(
  ctx: Pick<ServiceContext, 'db' | 'bus' | 'logger'>,
  guildId: string | null,
): Promise<void> {
  try {
    const { success: _ok, ...settings } = presentChatSettings(await currentChatSettings(ctx.db, guildId));
    await ctx.bus.publish(CHAT_BOTS_WS_CHANNEL, { type: 'chatSettingsChanged', ...settings });
  } catch (err) {
    ctx.logger.warn({ err: (err as Error).message }, 'could not push chat settings to the bot');
  }
}
