import Router from '@koa/router';
import { ASSERTION_HEADER } from '../../shared/auth/assertionVerifier';
import { APP_KEY_HEADER, auditWriter, AuditWriter } from '../../shared/auth/auditWriter';
import { auditIngestBody, ingestAuditEvent } from '../../shared/commands/ingestAuditEvent';
import { auditEventSchema, presentAuditEvent } from '../../shared/presenters/auditEvent';
import { z } from '../../shared/zod';
import { AppContext, AppState, defineRoute } from '../routing';
import type { ApiServices } from '../services';
import { created } from '../responses';

type AuditState = AppState & { auditWriter?: AuditWriter };

const writerOf = (ctx: AppContext) => auditWriter(ctx.services.config, ctx.state.principal, ctx.get(APP_KEY_HEADER));

/** Audit ingestion from internal apps and services (spec §4.24, §5.8). */
export function internalAuditRoutes(router: Router<AppState, { services: ApiServices }>): void {
  // The writer is established before the body is validated: a caller without access gets 401/403
  // and learns nothing about the input rules (the order defineRoute keeps for permission rules).
  router.post('/v1/internal/audit', async (ctx, next) => {
    (ctx.state as AuditState).auditWriter = writerOf(ctx);
    await next();
  });
  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/internal/audit',
      summary: 'Ingest an audit event from an internal app or service',
      description:
        'Caller: X-ID-App-Key (an internal app secret) or a credential with audit:write. user_id must be an existing user when source_service is api ' +
        '(other services may send external ids or null); actor_id must be an existing user when given. An app writing through X-ID-App-Key that names ' +
        'an end user (user_id or actor_id set) must also send X-ID-App-Assertion from the same app whose subject is that user. One assertion vouches ' +
        'for one user: an app naming two different users in user_id and actor_id is refused (403); an audit:write credential may write such an event.',
      tags: ['audit'],
      auth: 'public',
      // The route checks X-ID-App-Key, the assertion or audit:write itself (auditWriter).
      security: [{ idAppKey: [] }, { idAppKey: [], idAppAssertion: [] }, { bearerAuth: [] }],
      body: auditIngestBody,
      responses: {
        201: { description: 'The recorded event', schema: z.object({ data: auditEventSchema }) },
        400: { description: 'Invalid body, unknown user_id or actor_id' },
        401: { description: 'No valid app key, credential or assertion' },
        403: { description: 'Credential without audit:write, or an app naming two different users' },
      },
    },
    async (ctx, { body: b }) => {
      const writer = (ctx.state as AuditState).auditWriter ?? writerOf(ctx);
      const event = await ingestAuditEvent(ctx.services, writer, b, ctx.get(ASSERTION_HEADER));
      created(ctx, { data: presentAuditEvent(event) });
    },
  );
}
