import Router from '@koa/router';
import { appForKey, ASSERTION_HEADER, verifyAppAssertion } from '../../shared/auth/assertionVerifier';
import { AUDIT_EVENT_TYPES, recordAuditEvent, SOURCE_SERVICES } from '../../shared/commands/recordAuditEvent';
import { badRequest, serviceUnavailable, unauthorized } from '../../shared/errors';
import { authorize } from '../../shared/policies';
import { presentAuditEvent } from '../../shared/presenters/auditEvent';
import { z } from '../../shared/zod';
import { AppContext, AppState, created, defineRoute } from '../routing';
import type { ApiServices } from '../services';

export const APP_KEY_HEADER = 'x-id-app-key';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const body = z.object({
  user_id: z.string().max(255).nullish(),
  event_type: z.enum(AUDIT_EVENT_TYPES, { errorMap: () => ({ message: `must be one of ${AUDIT_EVENT_TYPES.join(', ')}` }) }),
  resource_type: z.string().max(64).nullish(),
  resource_id: z.string().max(255).nullish(),
  actor_id: z.string().max(255).nullish(),
  ip_address: z.string().max(64).nullish(),
  user_agent: z.string().max(2000).nullish(),
  description: z.string().max(4000).nullish(),
  metadata: z.record(z.unknown()).nullish().refine((m) => !m || JSON.stringify(m).length <= 16_384, 'must be at most 16 KiB of JSON'),
  status: z.enum(['success', 'failure']).default('success'),
  error_message: z.string().max(4000).nullish(),
  source_service: z.enum(SOURCE_SERVICES).default('api'),
});

const auditEventSchema = z.object({
  id: z.string().uuid(),
  user_id: z.string().nullable(),
  event_type: z.string(),
  resource_type: z.string().nullable(),
  resource_id: z.string().nullable(),
  actor_id: z.string().nullable(),
  ip_address: z.string().nullable(),
  user_agent: z.string().nullable(),
  description: z.string().nullable(),
  metadata: z.record(z.unknown()),
  status: z.enum(['success', 'failure']),
  error_message: z.string().nullable(),
  country_code: z.string().nullable(),
  country_name: z.string().nullable(),
  city: z.string().nullable(),
  region: z.string().nullable(),
  source_service: z.string(),
  created_at: z.string(),
  is_reported: z.boolean(),
});

async function userExists(ctx: AppContext, id: string): Promise<boolean> {
  if (!UUID.test(id)) return false;
  return !!(await ctx.services.db('users').where('id', id.toLowerCase()).first('id'));
}

/**
 * Who is writing: an internal app by X-ID-App-Key (constant-time match against ID_APPS), or a
 * credential holding audit:write (the system key is allowlisted here). Anything else is 401/403.
 */
function writer(ctx: AppContext): { appId: string | null } {
  const key = ctx.get(APP_KEY_HEADER);
  if (key) {
    const appId = appForKey(ctx.services.config, key);
    if (!appId) throw unauthorized('invalid X-ID-App-Key');
    return { appId };
  }
  authorize(ctx.state.principal, 'audit:write');
  return { appId: null };
}

type AuditState = AppState & { auditWriter?: { appId: string | null } };

/** Audit ingestion from internal apps and services (spec §4.24, §5.8). */
export function internalAuditRoutes(router: Router<AppState, { services: ApiServices }>): void {
  // The writer is established before the body is validated: a caller without access gets 401/403
  // and learns nothing about the input rules (the order defineRoute keeps for permission rules).
  router.post('/v1/internal/audit', async (ctx, next) => {
    (ctx.state as AuditState).auditWriter = writer(ctx as unknown as AppContext);
    await next();
  });
  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/internal/audit',
      summary: 'Ingest an audit event from an internal app or service',
      description:
        'Caller: X-ID-App-Key (an internal app secret) or a credential with audit:write. user_id must be an existing user when source_service is api (other services may send external ids or null); actor_id must be an existing user when given. An app writing through X-ID-App-Key on behalf of an end user (user_id set) must also send X-ID-App-Assertion from the same app whose subject is that user_id.',
      tags: ['audit'],
      auth: 'public',
      body,
      responses: {
        201: { description: 'The recorded event', schema: z.object({ data: auditEventSchema }) },
        400: { description: 'Invalid body, unknown user_id or actor_id' },
        401: { description: 'No valid app key, credential or assertion' },
      },
    },
    async (ctx, { body: b }) => {
      const { appId } = (ctx.state as AuditState).auditWriter ?? writer(ctx);
      const userId = b.user_id || null;
      if (userId && b.source_service === 'api' && !(await userExists(ctx, userId))) throw badRequest('user_id: unknown user');
      if (b.actor_id && !(await userExists(ctx, b.actor_id))) throw badRequest('actor_id: unknown user');
      if (appId && userId) {
        // An app without a user token may attribute an event to a user only with that user's assertion.
        const a = await verifyAppAssertion(ctx.services.config, ctx.services.redis, ctx.get(ASSERTION_HEADER) || null);
        if (!a.ok) {
          if (a.reason === 'unavailable') throw serviceUnavailable(a.message);
          throw unauthorized(`invalid X-ID-App-Assertion: ${a.message}`);
        }
        if (a.appId !== appId) throw unauthorized('X-ID-App-Assertion was issued by another app than X-ID-App-Key');
        if (a.subject !== userId) throw unauthorized('X-ID-App-Assertion subject does not match user_id');
      }
      const event = await recordAuditEvent({
        user_id: userId && UUID.test(userId) ? userId.toLowerCase() : userId,
        event_type: b.event_type,
        resource_type: b.resource_type ?? null,
        resource_id: b.resource_id ?? null,
        actor_id: b.actor_id ? b.actor_id.toLowerCase() : null,
        ip_address: b.ip_address ?? null,
        user_agent: b.user_agent ?? null,
        description: b.description ?? null,
        metadata: b.metadata ?? {},
        status: b.status,
        error_message: b.error_message ?? null,
        source_service: b.source_service,
      });
      created(ctx, { data: presentAuditEvent(event) });
    },
  );
}
