import type { Knex } from 'knex';
import type Redis from 'ioredis';
import { appForKey, verifyAppAssertion } from '../auth/assertionVerifier';
import type { Config } from '../config';
import { badRequest, forbidden, serviceUnavailable, unauthorized } from '../errors';
import type { AuditEvent } from '../models/AuditEvent';
import { authorizePermission, Principal } from '../policies';
import { z, zInput, isUuid } from '../zod';
import { AUDIT_EVENT_TYPES, recordAuditEvent, SOURCE_SERVICES } from '../audit';


/** The audit event an internal app or service may write (POST /v1/internal/audit, GraphQL logAuditEvent). */
export const auditIngestBody = z.object({
  user_id: z.string().max(255).nullish(),
  event_type: z.enum(AUDIT_EVENT_TYPES, { errorMap: () => ({ message: `must be one of ${AUDIT_EVENT_TYPES.join(', ')}` }) }),
  resource_type: z.string().max(64).nullish(),
  resource_id: z.string().max(255).nullish(),
  actor_id: z.string().max(255).nullish(),
  ip_address: z.string().max(64).nullish(),
  user_agent: z.string().max(2000).nullish(),
  description: z.string().max(4000).nullish(),
  metadata: z.record(z.unknown()).nullish().refine((m) => !m || JSON.stringify(m).length <= 16_384, 'must be at most 16 KiB of JSON'),
  status: z.enum(['success', 'failure'], { errorMap: () => ({ message: 'must be success or failure' }) }).default('success'),
  error_message: z.string().max(4000).nullish(),
  source_service: z.enum(SOURCE_SERVICES).default('api'),
});
export type AuditIngestInput = z.infer<typeof auditIngestBody>;
/** auditIngestBody behind the text rule, for callers outside defineRoute (GraphQL, realtime requests) whose metadata arrives as JSON text. */
export const auditIngestInput = zInput(auditIngestBody);

export interface AuditWriter {
  /** The internal app that authenticated with X-ID-App-Key, or null for a credential with audit:write. */
  appId: string | null;
}

/**
 * Who is writing: an internal app by X-ID-App-Key (constant-time match against ID_APPS), or a
 * credential holding audit:write (the system key holds everything). Anything else is 401/403.
 */
export function auditWriter(config: Pick<Config, 'idApps'>, principal: Principal, appKey: string | null | undefined): AuditWriter {
  if (appKey) {
    const appId = appForKey(config, appKey);
    if (!appId) throw unauthorized('invalid X-ID-App-Key');
    return { appId };
  }
  authorizePermission(principal, 'audit:write');
  return { appId: null };
}

async function userExists(db: Knex, id: string): Promise<boolean> {
  if (!isUuid(id)) return false;
  return !!(await db('users').where('id', id.toLowerCase()).first('id'));
}

/** A UUID as stored (lowercase); external ids as sent. */
const storedId = (id: string) => (isUuid(id) ? id.toLowerCase() : id);

/**
 * Spec §5.8 for an app writing with X-ID-App-Key: every field naming an end user (user_id,
 * actor_id) must be vouched for by an X-ID-App-Assertion from the same app whose subject is that
 * user. One assertion has one subject, so naming two different users is refused (403) before the
 * assertion is checked, and its nonce is not spent; an audit:write credential may write such events.
 */
async function checkAppAttribution(
  deps: { config: Config; redis: Redis },
  appId: string,
  userId: string | null,
  actorId: string | null,
  assertion: string | null,
): Promise<void> {
  const named: Array<[field: string, id: string]> = [];
  if (userId) named.push(['user_id', userId]);
  if (actorId) named.push(['actor_id', actorId]);
  if (!named.length) return;
  const subjects = new Set(named.map(([, id]) => id));
  if (subjects.size > 1) throw forbidden('user_id and actor_id name different users: an app attributes an event to one end user only, its assertion subject');
  const a = await verifyAppAssertion(deps.config, deps.redis, assertion);
  if (!a.ok) {
    if (a.reason === 'unavailable') throw serviceUnavailable(a.message);
    throw unauthorized(`invalid X-ID-App-Assertion: ${a.message}`);
  }
  if (a.appId !== appId) throw unauthorized('X-ID-App-Assertion was issued by another app than X-ID-App-Key');
  if (!subjects.has(a.subject)) throw unauthorized(`X-ID-App-Assertion subject does not match ${named.map(([field]) => field).join(' and ')}`);
}

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
  if (userId && input.source_service === 'api' && !(await userExists(deps.db, userId))) throw badRequest('user_id: unknown user');
  if (actorId && !(await userExists(deps.db, actorId))) throw badRequest('actor_id: unknown user');
  if (writer.appId) await checkAppAttribution(deps, writer.appId, userId, actorId, assertion || null);
  return recordAuditEvent({
    user_id: userId,
    event_type: input.event_type,
    resource_type: input.resource_type ?? null,
    resource_id: input.resource_id ?? null,
    actor_id: actorId,
    ip_address: input.ip_address ?? null,
    user_agent: input.user_agent ?? null,
    description: input.description ?? null,
    metadata: input.metadata ?? {},
    status: input.status,
    error_message: input.error_message ?? null,
    source_service: input.source_service,
  });
}
