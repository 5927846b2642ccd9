import { Arg, Ctx, Field, InputType, Mutation, ObjectType, Resolver } from 'type-graphql';
import { ASSERTION_HEADER } from '../../shared/auth/assertionVerifier';
import { auditIngestInput, auditWriter, ingestAuditEvent } from '../../shared/commands/ingestAuditEvent';
import { badRequest, validationError } from '../../shared/errors';
import type { AuditEvent } from '../../shared/models/AuditEvent';
import type { GqlContext } from './context';

@InputType({ description: 'An audit event written by an internal app or service (same rules as POST /v1/internal/audit)' })
export class AuditEventInput {
  @Field(() => String, { nullable: true, description: 'empty or null: a system event' })
  userId?: string | null;

  @Field(() => String)
  eventType!: string;

  @Field(() => String, { nullable: true })
  resourceType?: string | null;

  @Field(() => String, { nullable: true })
  resourceId?: string | null;

  @Field(() => String, { nullable: true })
  actorId?: string | null;

  @Field(() => String, { nullable: true })
  ipAddress?: string | null;

  @Field(() => String, { nullable: true })
  userAgent?: string | null;

  @Field(() => String, { nullable: true })
  description?: string | null;

  @Field(() => String, { nullable: true, description: 'JSON-encoded object' })
  metadataJson?: string | null;

  @Field(() => String, { nullable: true, description: 'success (default) or failure' })
  status?: string | null;

  @Field(() => String, { nullable: true })
  errorMessage?: string | null;

  @Field(() => String, { nullable: true, description: 'api (default), id, backend, policies, chat_bot, stream_bot' })
  sourceService?: string | null;
}

@ObjectType('AuditEvent')
export class AuditEventGql {
  @Field(() => String) id!: string;
  @Field(() => String, { nullable: true }) userId!: string | null;
  @Field(() => String) eventType!: string;
  @Field(() => String, { nullable: true }) resourceType!: string | null;
  @Field(() => String, { nullable: true }) resourceId!: string | null;
  @Field(() => String, { nullable: true }) actorId!: string | null;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field(() => String) status!: string;
  @Field(() => String) sourceService!: string;
  @Field(() => String) createdAt!: string;
}

function present(e: AuditEvent): AuditEventGql {
  return {
    id: e.id,
    userId: e.user_id,
    eventType: e.event_type,
    resourceType: e.resource_type,
    resourceId: e.resource_id,
    actorId: e.actor_id,
    description: e.description,
    status: e.status,
    sourceService: e.source_service,
    createdAt: e.created_at.toISOString(),
  };
}

/** GraphQL audit ingestion: the system key, audit:write, or an internal app (X-ID-App-Key + assertion). */
@Resolver()
export class AuditResolver {
  private async write(ctx: GqlContext, input: AuditEventInput): Promise<AuditEventGql> {
    const writer = auditWriter(ctx.services.config, ctx.principal, ctx.header('x-id-app-key'));
    let metadata: unknown = undefined;
    if (input.metadataJson) {
      try {
        metadata = JSON.parse(input.metadataJson);
      } catch {
        throw badRequest('metadataJson: must be a JSON-encoded object');
      }
    }
    const parsed = auditIngestInput.safeParse({
      user_id: input.userId,
      event_type: input.eventType,
      resource_type: input.resourceType,
      resource_id: input.resourceId,
      actor_id: input.actorId,
      ip_address: input.ipAddress,
      user_agent: input.userAgent,
      description: input.description,
      metadata,
      status: input.status ?? undefined,
      error_message: input.errorMessage,
      source_service: input.sourceService ?? undefined,
    });
    if (!parsed.success) throw validationError(parsed.error, 'input');
    return present(await ingestAuditEvent(ctx.services, writer, parsed.data, ctx.header(ASSERTION_HEADER)));
  }

  @Mutation(() => AuditEventGql, { description: 'Record an audit event (system key, audit:write, or an internal app)' })
  createAuditEvent(@Arg('input', () => AuditEventInput) input: AuditEventInput, @Ctx() ctx: GqlContext): Promise<AuditEventGql> {
    return this.write(ctx, input);
  }

  @Mutation(() => AuditEventGql, { description: 'Same as createAuditEvent' })
  logAuditEvent(@Arg('input', () => AuditEventInput) input: AuditEventInput, @Ctx() ctx: GqlContext): Promise<AuditEventGql> {
    return this.write(ctx, input);
  }
}
