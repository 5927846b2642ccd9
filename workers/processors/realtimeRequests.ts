import type { ServiceContext } from '../../shared/context';
import { auditIngestInput, ingestAuditEvent } from '../../shared/commands/ingestAuditEvent';
import { recordAuditEvent, SOURCE_SERVICES } from '../../shared/audit';
import { toHttpError, validationError } from '../../shared/errors';
import { PubSub } from '../../shared/events';
import { decodeEnvelope, encodeEnvelope, PayloadCase } from '../../shared/proto';
import type { RealtimeRequestJob } from '../../shared/queues';
import { redisKey } from '../../shared/redis';
import type { Processor } from './types';

/**
 * Database work for protobuf requests of service clients (spec §4.26). The realtime instance has
 * already authenticated and authorised the sender; this runs the request and publishes the reply
 * on PubSub.rpcReply(instanceId), where the instance matches it to the socket by requestId.
 * Failures become a reply with success=false, never a silent drop.
 */
export const realtimeRequestsProcessor: Processor<'realtimeRequests'> = async (job, ctx) => {
  const data = job.data;
  let reply: [PayloadCase, Record<string, unknown>];
  try {
    const env = decodeEnvelope(Buffer.from(data.envelope, 'base64'));
    switch (env.payload) {
      case 'createAuditEvent':
        reply = ['createAuditEventResponse', await createAuditEvent(ctx, data, (env.createAuditEvent ?? {}) as AuditRequest)];
        break;
      case 'chatSettingsRequest':
        reply = ['chatSettingsResponse', await chatSettings(ctx, data, (env.chatSettingsRequest ?? {}) as SettingsRequest)];
        break;
      default:
        reply = ['error', { message: `unsupported request ${env.payload ?? env.type}`, code: 'bad_request' }];
    }
  } catch (err) {
    ctx.logger.error({ err, requestId: data.requestId }, 'realtime request failed');
    reply = ['error', { message: 'the request could not be processed', code: 'internal' }];
  }
  const envelope = Buffer.from(encodeEnvelope(reply[0], reply[1])).toString('base64');
  await ctx.redis.publish(redisKey(ctx.config, PubSub.rpcReply(data.instanceId)), JSON.stringify({ requestId: data.requestId, envelope }));
  return { replied: reply[0] };
};

interface AuditRequest {
  userId?: string;
  eventType?: string;
  resourceType?: string;
  resourceId?: string;
  actorId?: string;
  ipAddress?: string;
  userAgent?: string;
  description?: string;
  metadataJson?: string;
  status?: string;
  errorMessage?: string;
  sourceService?: string;
}

/**
 * CreateAuditEventRequest → audit event, through the same validation and command as POST
 * /v1/internal/audit. The realtime instance only lets audit:write holders send it (realtime/rpc.ts),
 * so the writer is a credential, not an app key. Empty protobuf strings count as absent; the
 * connection's X-Source-Service is the default source.
 */
async function createAuditEvent(ctx: ServiceContext, job: RealtimeRequestJob, r: AuditRequest): Promise<Record<string, unknown>> {
  const fail = (error: string) => ({ success: false, error });
  let metadata: unknown;
  if (r.metadataJson) {
    try {
      metadata = JSON.parse(r.metadataJson);
    } catch {
      return fail('metadata_json: invalid JSON');
    }
    if (!metadata || typeof metadata !== 'object' || Array.isArray(metadata)) return fail('metadata_json: must encode a JSON object');
  }
  const parsed = auditIngestInput.safeParse({
    user_id: r.userId || undefined,
    event_type: r.eventType?.trim() || undefined,
    resource_type: r.resourceType || undefined,
    resource_id: r.resourceId || undefined,
    actor_id: r.actorId || undefined,
    ip_address: r.ipAddress || undefined,
    user_agent: r.userAgent || undefined,
    description: r.description || undefined,
    metadata,
    status: r.status || undefined,
    error_message: r.errorMessage || undefined,
    source_service: r.sourceService || job.sourceService || undefined,
  });
  if (!parsed.success) return fail(validationError(parsed.error, 'request').message);
  try {
    const event = await ingestAuditEvent(ctx, { appId: null }, parsed.data, null);
    return { success: true, auditEventId: event.id };
  } catch (err) {
    const known = toHttpError(err);
    if (known) return fail(known.message);
    throw err;
  }
}

interface SettingsPatch {
  autoSyncEnabled?: boolean;
  syncIntervalSeconds?: number;
  initialDelaySeconds?: number;
  defaultLanguage?: string;
  notifyOnGuildJoin?: boolean;
  notifyOnGuildLeave?: boolean;
  commandCooldownSeconds?: number;
}

interface SettingsRequest {
  action?: string;
  guildId?: string;
  globalPatch?: SettingsPatch;
  guildDefaultLanguage?: string;
}

const SNOWFLAKE = /^\d{1,25}$/;

function presentGlobal(row: Record<string, any>) {
  return {
    id: String(row.id),
    autoSyncEnabled: row.auto_sync_enabled,
    syncIntervalSeconds: row.sync_interval_seconds,
    initialDelaySeconds: row.initial_delay_seconds,
    defaultLanguage: row.default_language,
    notifyOnGuildJoin: row.notify_on_guild_join,
    notifyOnGuildLeave: row.notify_on_guild_leave,
    commandCooldownSeconds: row.command_cooldown_seconds,
    updatedAt: new Date(row.updated_at).toISOString(),
  };
}

async function loadGlobal(ctx: ServiceContext): Promise<Record<string, any>> {
  // The migration inserts the row; recreating it keeps a wiped table usable.
  await ctx.db('chat_bot_settings').insert({ id: 1 }).onConflict('id').ignore();
  return ctx.db('chat_bot_settings').where('id', 1).first();
}

/**
 * ChatSettingsRequest (120) → ChatSettingsResponse (121): read the global settings (plus a guild's),
 * patch the global settings, or set a guild's default language. Permissions (chat:read for GET,
 * chat:edit for updates) were checked by the realtime instance.
 */
async function chatSettings(ctx: ServiceContext, job: RealtimeRequestJob, r: SettingsRequest): Promise<Record<string, unknown>> {
  const fail = (error: string) => ({ success: false, error });
  const action = r.action ?? 'CHAT_SETTINGS_GET';
  const guildId = r.guildId || null;
  if (guildId && !SNOWFLAKE.test(guildId)) return fail('guild_id: must be a snowflake (digits)');
  const locales = ctx.config.supportedLocales;

  if (action === 'CHAT_SETTINGS_UPDATE_GLOBAL') {
    const p = r.globalPatch ?? {};
    const patch: Record<string, unknown> = {};
    const intField = (name: string, column: string, v: number | undefined, min: number, max: number): string | null => {
      if (v === undefined) return null;
      if (!Number.isInteger(v) || v < min || v > max) return `${name}: must be an integer from ${min} to ${max}`;
      patch[column] = v;
      return null;
    };
    const problem =
      intField('sync_interval_seconds', 'sync_interval_seconds', p.syncIntervalSeconds, 60, 86400) ??
      intField('initial_delay_seconds', 'initial_delay_seconds', p.initialDelaySeconds, 0, 3600) ??
      intField('command_cooldown_seconds', 'command_cooldown_seconds', p.commandCooldownSeconds, 0, 3600);
    if (problem) return fail(problem);
    if (p.defaultLanguage !== undefined) {
      if (!locales.includes(p.defaultLanguage)) return fail(`default_language: must be one of ${locales.join(', ')}`);
      patch.default_language = p.defaultLanguage;
    }
    if (p.autoSyncEnabled !== undefined) patch.auto_sync_enabled = p.autoSyncEnabled;
    if (p.notifyOnGuildJoin !== undefined) patch.notify_on_guild_join = p.notifyOnGuildJoin;
    if (p.notifyOnGuildLeave !== undefined) patch.notify_on_guild_leave = p.notifyOnGuildLeave;
    if (Object.keys(patch).length === 0) return fail('global_patch: at least one field is required');
    await loadGlobal(ctx);
    await ctx.db('chat_bot_settings').where('id', 1).update({ ...patch, updated_at: ctx.db.fn.now() });
  } else if (action === 'CHAT_SETTINGS_UPDATE_GUILD') {
    if (!guildId) return fail('guild_id: required');
    const lang = r.guildDefaultLanguage ?? null;
    if (lang !== null && !locales.includes(lang)) return fail(`guild_default_language: must be one of ${locales.join(', ')}`);
    await ctx.db.transaction(async (trx) => {
      await trx('chat_guild_settings')
        .insert({ guild_id: guildId, default_language: lang })
        .onConflict('guild_id')
        .merge({ default_language: lang, updated_at: trx.fn.now() });
      await recordAuditEvent(
        {
          user_id: job.principal.userId,
          event_type: 'bot_guild_configured',
          resource_type: 'chat_guild',
          resource_id: guildId,
          actor_id: job.principal.userId,
          metadata: { default_language: lang, via: 'websocket', api_key_id: job.principal.apiKeyId },
          source_service: job.sourceService && (SOURCE_SERVICES as readonly string[]).includes(job.sourceService) ? job.sourceService : 'api',
        },
        trx,
      );
    });
  } else if (action !== 'CHAT_SETTINGS_GET') {
    return fail(`action: unknown action ${action}`);
  }

  const global = await loadGlobal(ctx);
  const out: Record<string, unknown> = { success: true, global: presentGlobal(global) };
  if (guildId) {
    const g = await ctx.db('chat_guild_settings').where('guild_id', guildId).first();
    const lang: string | null = g?.default_language ?? null;
    out.guild = { guildId, ...(lang ? { defaultLanguage: lang } : {}), effectiveLanguage: lang ?? global.default_language };
  }
  return out;
}
