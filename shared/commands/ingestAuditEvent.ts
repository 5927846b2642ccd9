import type { Knex } from 'knex';
import type Redis from 'ioredis';
import { AuditWriter, checkAppAttribution } from '../auth/auditWriter';
import type { Config } from '../config';
import { badRequest } from '../errors';
import type { AuditEvent } from '../models/AuditEvent';
import { ipAddressOf } from '../ipAddress';
import { z, zChars, zInput, isUuid } from '../zod';
import { attributed, Attribution, AUDIT_EVENT_TYPES, recordAuditEvent, SOURCE_SERVICES } from '../audit';

/** The client address an event reports: an IPv4 or IPv6 address as such (no zone id), not any text. */
/** An address as written, without a zone id (which would be dropped); an IPv4-mapped one is stored as IPv4. */
const isIpAddress = (v: string) => ipAddressOf(v) !== null && !v.includes('%');

/** The audit event an internal app or service may write (POST /v1/internal/audit, GraphQL logAuditEvent). */
export const auditIngestBody = z.object({
  user_id: zChars({ max: 255 }).nullish(),
  event_type: z.enum(AUDIT_EVENT_TYPES, {
    errorMap: () => ({ message: `must be one of ${AUDIT_EVENT_TYPES.join(', ')}` }),
  }),
  resource_type: zChars({ max: 64 }).nullish(),
  resource_id: zChars({ max: 255 }).nullish(),
  actor_id: zChars({ max: 255 }).nullish(),
  ip_address: zChars({ max: 64 })
    .refine(isIpAddress, 'must be an IP address')
    .transform((v) => ipAddressOf(v)!)
    .nullish(),
  user_agent: zChars({ max: 2000 }).nullish(),
  description: zChars({ max: 4000 }).nullish(),
  metadata: z
    .record(z.unknown())
    .nullish()
    .refine((m) => !m || JSON.stringify(m).length <= 16_384, 'must be at most 16 KiB of JSON'),
  status: z
    .enum(['success', 'failure'], { errorMap: () => ({ message: 'must be success or failure' }) })
    .default('success'),
  error_message: zChars({ max: 4000 }).nullish(),
  source_service: z.enum(SOURCE_SERVICES).default('api'),
});
type AuditIngestInput = z.infer<typeof auditIngestBody>;
/** auditIngestBody behind the text rule, for callers outside defineRoute (GraphQL, realtime requests). */
export const auditIngestInput = zInput(auditIngestBody);

/** An audit event as GraphQL's AuditEventInput and protobuf's CreateAuditEventRequest name its fields. */
export interface AuditEventFields {
  userId?: string | null;
  eventType?: string | null;
  resourceType?: string | null;
  resourceId?: string | null;
  actorId?: string | null;
  ipAddress?: string | null;
  userAgent?: string | null;
  description?: string | null;
  status?: string | null;
  errorMessage?: string | null;
  sourceService?: string | null;
}

/**
 * The REST body (to validate with auditIngestInput) of an event sent with camelCase fields; the
 * metadata arrives as JSON text there, and each edge parses it with its own wording. A null status
 * or source service takes the default.
 */
export function auditBodyOf(f: AuditEventFields, metadata: unknown): unknown {
  return {
    user_id: f.userId,
    event_type: f.eventType,
    resource_type: f.resourceType,
    resource_id: f.resourceId,
    actor_id: f.actorId,
    ip_address: f.ipAddress,
    user_agent: f.userAgent,
    description: f.description,
    metadata,
    status: f.status ?? undefined,
    error_message: f.errorMessage,
    source_service: f.sourceService ?? undefined,
  };
}

async function userExists(db: Knex, id: string): Promise<boolean> {
  if (!isUuid(id)) return false;
  return !!(await db('users').where('id', id.toLowerCase()).first('id'));
}

/** A UUID as stored (lowercase); external ids as sent. */
const storedId = (id: string) => (isUuid(id) ? id.toLowerCase() : id);

/**
 * Validates references and attribution, then records the event. `user_id` must be an existing user
 * when the source is the api (bots may send external ids or null); `actor_id` must exist when
 * given. An app attributing an event to an end user (user_id or actor_id) without a user token
 * must present that user's X-ID-App-Assertion, issued by the same app (spec §5.8).
 */
export async function ingestAuditEvent(
  deps: { config: Config; redis: Redis; db: Knex },
  writer: AuditWriter,
  input: AuditIngestInput,
  assertion: string | null | undefined,
): Promise<AuditEvent> {
  const userId = input.user_id ? storedId(input.user_id) : null;
  const actorId = input.actor_id ? storedId(input.actor_id) : null;
  if (userId && input.source_service === 'api' && !(await userExists(deps.db, userId))) {
    throw badRequest('user_id: unknown user');
  }
  if (actorId && !(await userExists(deps.db, actorId))) throw badRequest('actor_id: unknown user');
  if (writer.appId) await checkAppAttribution(deps, writer.appId, userId, actorId, assertion || null);
  // The writer reports who acted and from where (an app relays its end user's address).
  const reported: Attribution = { actorId, ipAddress: input.ip_address, userAgent: input.user_agent };
  return recordAuditEvent(
    attributed(reported, {
      user_id: userId,
      event_type: input.event_type,
      resource_type: input.resource_type ?? null,
      resource_id: input.resource_id ?? null,
      description: input.description ?? null,
      metadata: input.metadata ?? {},
      status: input.status,
      error_message: input.error_message ?? null,
      source_service: input.source_service,
    }),
    deps.db,
  );
}
