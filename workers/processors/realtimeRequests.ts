import type { ServiceContext } from '../../shared/context';
import { CREDENTIAL_WRITER } from '../../shared/auth/auditWriter';
import { chatBotSettings, ChatSettingsRequest } from '../../shared/commands/chatBotSettings';
import {
  auditBodyOf,
  AuditEventFields,
  auditIngestInput,
  ingestAuditEvent,
} from '../../shared/commands/ingestAuditEvent';
import {
  badRequest,
  databaseFailureReason,
  HttpError,
  isDatabaseUnavailable,
  toHttpError,
  validationError,
} from '../../shared/errors';
import { PubSub } from '../../shared/events';
import { presentAuditEventReceipt } from '../../shared/presenters/auditEvent';
import { presentChatSettings } from '../../shared/presenters/chatBotSettings';
import { checkJsonLimits } from '../../shared/jsonLimits';
import { decodeEnvelope, encodeEnvelope, PayloadCase } from '../../shared/proto';
import { failureReply } from '../../shared/proto/rpc';
import type { RealtimeRequestJob } from '../../shared/queues';
import { redisKey } from '../../shared/redis';
import type { Processor } from './types';

/**
 * Database work for protobuf requests of service clients (spec §4.26). The realtime instance has
 * already authenticated and authorised the sender; this runs the request through the same command
 * as REST and publishes the reply on PubSub.rpcReply(instanceId), where the instance matches it to
 * the socket by requestId. Failures become a reply with success=false, never a silent drop.
 */
export const realtimeRequestsProcessor: Processor<'realtimeRequests'> = async (job, ctx) => {
  const data = job.data;
  let reply: [PayloadCase, Record<string, unknown>];
  try {
    const env = decodeEnvelope(Buffer.from(data.envelope, 'base64'));
    switch (env.payload) {
      case 'createAuditEvent':
        reply = [
          'createAuditEventResponse',
          await createAuditEvent(ctx, data, (env.createAuditEvent ?? {}) as AuditRequest),
        ];
        break;
      case 'chatSettingsRequest':
        reply = [
          'chatSettingsResponse',
          await chatSettings(ctx, data, (env.chatSettingsRequest ?? {}) as ChatSettingsRequest),
        ];
        break;
      default:
        reply = ['error', { message: `unsupported request ${env.payload ?? env.type}`, code: 'bad_request' }];
    }
  } catch (err) {
    if (isDatabaseUnavailable(err)) {
      // A database outage fails every request meanwhile: folded, not a line each.
      const reason = databaseFailureReason(err);
      ctx.dbOutages.failure('realtime request failed', reason, { err: reason, requestId: data.requestId });
    } else ctx.logger.error({ err, requestId: data.requestId }, 'realtime request failed');
    reply = ['error', { message: 'the request could not be processed', code: 'internal' }];
  }
  const envelope = Buffer.from(encodeEnvelope(reply[0], reply[1])).toString('base64');
  await ctx.redis.publish(
    redisKey(ctx.config, PubSub.rpcReply(data.instanceId)),
    JSON.stringify({ requestId: data.requestId, envelope }),
  );
  return { replied: reply[0] };
};

/** CreateAuditEventRequest as protobuf decodes it: the camelCase fields, metadata as JSON text. */
type AuditRequest = { [K in keyof AuditEventFields]?: string } & { metadataJson?: string };

/** The REST body of a CreateAuditEventRequest; throws 400 when metadata_json is not a JSON object. */
function auditRequestBody(r: AuditRequest, connectionSource: string | null): unknown {
  let metadata: unknown;
  if (r.metadataJson) {
    try {
      metadata = JSON.parse(r.metadataJson);
    } catch {
      throw badRequest('metadata_json: invalid JSON');
    }
    if (!metadata || typeof metadata !== 'object' || Array.isArray(metadata))
      throw badRequest('metadata_json: must encode a JSON object');
    // The body rule of POST /v1/internal/audit: 1e400 would be stored as null, silently.
    checkJsonLimits({ metadata_json: metadata });
  }
  // Protobuf strings have no null: an empty one counts as absent. The connection's X-Source-Service
  // is the default source.
  const present = Object.fromEntries(Object.entries(r).filter(([, v]) => v !== '')) as AuditEventFields;
  return auditBodyOf(
    {
      ...present,
      eventType: r.eventType?.trim() || undefined,
      sourceService: r.sourceService || connectionSource || undefined,
    },
    metadata,
  );
}

/**
 * CreateAuditEventRequest → audit event, through the same validation and command as POST
 * /v1/internal/audit. The realtime instance only lets audit:write holders send it (realtime/access.ts),
 * so the writer is a credential, not an app key.
 */
async function createAuditEvent(
  ctx: ServiceContext,
  job: RealtimeRequestJob,
  r: AuditRequest,
): Promise<Record<string, unknown>> {
  try {
    const parsed = auditIngestInput.safeParse(auditRequestBody(r, job.sourceService));
    if (!parsed.success) throw validationError(parsed.error, 'request');
    return presentAuditEventReceipt(await ingestAuditEvent(ctx, CREDENTIAL_WRITER, parsed.data, null));
  } catch (err) {
    const known = toHttpError(err);
    if (known) return failureReply('createAuditEvent', known.message)[1];
    throw err;
  }
}

/** ChatSettingsRequest (120) → ChatSettingsResponse (121); bad input is answered with success=false. */
async function chatSettings(
  ctx: ServiceContext,
  job: RealtimeRequestJob,
  r: ChatSettingsRequest,
): Promise<Record<string, unknown>> {
  const { userId, apiKeyId } = job.principal;
  try {
    const state = await chatBotSettings(ctx, r, { actorId: userId }, { apiKeyId, sourceService: job.sourceService });
    return presentChatSettings(state);
  } catch (err) {
    if (err instanceof HttpError) return failureReply('chatSettingsRequest', err.message)[1];
    throw err;
  }
}
