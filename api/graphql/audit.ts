import { Arg, Ctx, Field, InputType, Mutation, ObjectType, Resolver } from 'type-graphql';
import { ASSERTION_HEADER } from '../../shared/auth/assertionVerifier';
import { APP_KEY_HEADER, auditWriter } from '../../shared/auth/auditWriter';
import {
  auditBodyOf,
  AuditEventFields,
  auditIngestInput,
  ingestAuditEvent,
} from '../../shared/commands/ingestAuditEvent';
import { badRequest, validationError } from '../../shared/errors';
import { jsonValuesOver, MAX_JSON_VALUES } from '../../shared/jsonLimits';
import { checkParsedBody } from '../middleware/body';
import { presentAuditEvent } from '../../shared/presenters/auditEvent';
import { camelKeys } from '../../shared/presenters/camel';
import type { GqlContext } from './context';
import { JSONScalar } from './pagination';

@InputType({
  description: 'An audit event written by an internal app or service (same rules as POST /v1/internal/audit)',
})
export class AuditEventInput implements AuditEventFields {
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

/** The recorded event: POST /v1/internal/audit's answer (spec §2 Audit event) in camelCase. */
@ObjectType('AuditEvent', { simpleResolvers: true })
export class AuditEventGql {
  @Field(() => String) id!: string;
  @Field(() => String, { nullable: true }) userId!: string | null;
  @Field(() => String) eventType!: string;
  @Field(() => String, { nullable: true }) resourceType!: string | null;
  @Field(() => String, { nullable: true }) resourceId!: string | null;
  @Field(() => String, { nullable: true }) actorId!: string | null;
  @Field(() => String, { nullable: true }) ipAddress!: string | null;
  @Field(() => String, { nullable: true }) userAgent!: string | null;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field(() => JSONScalar) metadata!: Record<string, unknown>;
  @Field(() => String) status!: string;
  @Field(() => String, { nullable: true }) errorMessage!: string | null;
  @Field(() => String, { nullable: true }) countryCode!: string | null;
  @Field(() => String, { nullable: true }) countryName!: string | null;
  @Field(() => String, { nullable: true }) city!: string | null;
  @Field(() => String, { nullable: true }) region!: string | null;
  @Field(() => String) sourceService!: string;
  @Field(() => String) createdAt!: string;
  @Field(() => Boolean) isReported!: boolean;
}

/** GraphQL audit ingestion: the system key, audit:write, or an internal app (X-ID-App-Key + assertion). */
@Resolver()
export class AuditResolver {
  private async write(ctx: GqlContext, input: AuditEventInput): Promise<AuditEventGql> {
    const writer = auditWriter(ctx.services.config, ctx.principal, ctx.header(APP_KEY_HEADER));
    let metadata: unknown = undefined;
    if (input.metadataJson) {
      // Counted before parsing, as a body is: the text may be megabytes within a 4 MB body.
      if (jsonValuesOver(input.metadataJson))
        throw badRequest(`metadataJson: too many JSON values (at most ${MAX_JSON_VALUES} arrays, objects and items)`);
      try {
        metadata = JSON.parse(input.metadataJson);
      } catch {
        throw badRequest('metadataJson: must be a JSON-encoded object');
      }
      // Nested as deep as a JSON body may be (a body's string holds what the body parser never saw).
      checkParsedBody({ metadataJson: metadata });
    }
    const parsed = auditIngestInput.safeParse(auditBodyOf(input, metadata));
    if (!parsed.success) throw validationError(parsed.error, 'input');
    return camelKeys(
      presentAuditEvent(await ingestAuditEvent(ctx.services, writer, parsed.data, ctx.header(ASSERTION_HEADER))),
    );
  }

  @Mutation(() => AuditEventGql, {
    nullable: true,
    description: 'Record an audit event (system key, audit:write, or an internal app)',
  })
  createAuditEvent(
    @Arg('input', () => AuditEventInput) input: AuditEventInput,
    @Ctx() ctx: GqlContext,
  ): Promise<AuditEventGql> {
    return this.write(ctx, input);
  }

  @Mutation(() => AuditEventGql, { nullable: true, description: 'Same as createAuditEvent' })
  logAuditEvent(
    @Arg('input', () => AuditEventInput) input: AuditEventInput,
    @Ctx() ctx: GqlContext,
  ): Promise<AuditEventGql> {
    return this.write(ctx, input);
  }
}
