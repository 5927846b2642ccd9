import type { ServiceContext } from '../../shared/context';
import { AUDIT_EVENT_TYPES, recordAuditEvent, SOURCE_SERVICES } from '../../shared/commands/recordAuditEvent';
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

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

async function userExists(ctx: ServiceContext, id: string): Promise<boolean> {
  if (!UUID.test(id)) return false;
  return !!(await ctx.db('users').where('id', id.toLowerCase()).first('id'));
}

/**
 * CreateAuditEventRequest → audit event, with the rules of POST /v1/internal/audit: user_id must
 * be an existing user when source_service is api (other sources may use external ids; empty is a
 * system event), actor_id must be an existing user when given.
 */
async function createAuditEvent(ctx: ServiceContext, job: RealtimeRequestJob, r: AuditRequest): Promise<Record<string, unknown>> {
  const fail = (error: string) => ({ success: false, error });
  const eventType = (r.eventType ?? '').trim();
  if (!eventType) return fail('event_type: required');
  if (!(AUDIT_EVENT_TYPES as readonly string[]).includes(eventType)) return fail(`event_type: must be one of ${AUDIT_EVENT_TYPES.join(', ')}`);
  const sourceService = r.sourceService || job.sourceService || 'api';
  if (!(SOURCE_SERVICES as readonly string[]).includes(sourceService)) return fail(`source_service: must be one of ${SOURCE_SERVICES.join(', ')}`);
  const status = r.status || 'success';
  if (status !== 'success' && status !== 'failure') return fail('status: must be success or failure');
  let metadata: Record<string, unknown> = {};
  if (r.metadataJson) {
    try {
      const parsed = JSON.parse(r.metadataJson);
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return fail('metadata_json: must encode a JSON object');
      if (r.metadataJson.length > 16_384) return fail('metadata_json: must be at most 16 KiB of JSON');
      metadata = parsed;
    } catch {
      return fail('metadata_json: invalid JSON');
    }
  }
  const lengths: Array<[string, string | undefined, number]> = [
    ['user_id', r.userId, 255],
    ['resource_type', r.resourceType, 64],
    ['resource_id', r.resourceId, 255],
    ['actor_id', r.actorId, 255],
    ['ip_address', r.ipAddress, 64],
    ['user_agent', r.userAgent, 2000],
    ['description', r.description, 4000],
    ['error_message', r.errorMessage, 4000],
  ];
  for (const [field, value, max] of lengths) if (value && value.length > max) return fail(`${field}: at most ${max} characters`);
  const userId = r.userId || null;
  if (userId && sourceService === 'api' && !(await userExists(ctx, userId))) return fail('user_id: unknown user');
  if (r.actorId && !(await userExists(ctx, r.actorId))) return fail('actor_id: unknown user');
  const event = await recordAuditEvent({
    user_id: userId && UUID.test(userId) ? userId.toLowerCase() : userId,
    event_type: eventType,
    resource_type: r.resourceType || null,
    resource_id: r.resourceId || null,
    actor_id: r.actorId ? r.actorId.toLowerCase() : null,
    ip_address: r.ipAddress || null,
    user_agent: r.userAgent || null,
    description: r.description || null,
    metadata,
    status,
    error_message: r.errorMessage || null,
    source_service: sourceService,
  });
  return { success: true, auditEventId: event.id };
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
