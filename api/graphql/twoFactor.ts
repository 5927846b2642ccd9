import { Arg, Ctx, Field, InputType, Int, Mutation, ObjectType, Query, Resolver } from 'type-graphql';
import {
  disableTwoFactor,
  regenerateBackupCodes,
  setupTwoFactor,
  verifyTwoFactor,
} from '../../shared/commands/twoFactor';
import { validationError } from '../../shared/errors';
import { presentTwoFactorStatus } from '../../shared/presenters/twoFactor';
import { twoFactorRequirement, twoFactorState } from '../../shared/queries/twoFactor';
import { z, zChars, zUuid } from '../../shared/zod';
import { loadUser } from '../params';
import { authorizeTwoFactor } from '../twoFactorAccess';
import { GqlContext, gqlAttribution } from './context';

/*
 * The two-factor operations of spec §4.16: the GraphQL twins of /v1/users/me/2fa/* (same commands,
 * same policy). They are how the system key reaches 2FA (its REST allowlist does not include the
 * 2FA routes); it must pass userId.
 */

@ObjectType('TwoFactorStatus', { simpleResolvers: true })
export class GqlTwoFactorStatus {
  @Field(() => Boolean)
  enabled!: boolean;

  @Field(() => String, { nullable: true })
  enabledAt!: string | null;

  @Field(() => String, { nullable: true, description: 'Slug of the platform 2FA was set up from' })
  setupPlatform!: string | null;

  @Field(() => Int)
  backupCodesRemaining!: number;
}

@ObjectType('TwoFactorRequirement', { simpleResolvers: true })
export class GqlTwoFactorRequirement {
  @Field(() => Boolean)
  required!: boolean;

  @Field(() => [String], { description: 'Names of the roles with requiresTwoFactor the user holds' })
  requiredByRoles!: string[];

  @Field(() => Boolean)
  enabled!: boolean;

  @Field(() => Boolean)
  canEnable!: boolean;
}

@ObjectType('TwoFactorSetup', { simpleResolvers: true })
export class GqlTwoFactorSetup {
  @Field(() => String, { description: 'Base32 TOTP secret' })
  secret!: string;

  @Field(() => String, { description: 'otpauth:// URI' })
  qrCodeUrl!: string;

  @Field(() => String, { description: 'QR code as a PNG data URI' })
  qrCodeImage!: string;

  @Field(() => String)
  expiresAt!: string;

  @Field(() => String)
  platformSlug!: string;
}

@ObjectType('BackupCodes', { simpleResolvers: true })
export class GqlBackupCodes {
  @Field(() => [String], { description: 'Shown once' })
  backupCodes!: string[];

  @Field(() => String)
  message!: string;

  @Field(() => String, { nullable: true })
  platformSlug!: string | null;

  @Field(() => Boolean, { description: 'Always true (as on REST: a refused code is an error)' })
  success!: boolean;
}

@InputType()
export class SetupTwoFactorInput {
  @Field(() => String, { nullable: true, description: 'Platform id or slug (default: email)' })
  platformId?: string | null;

  @Field(() => String, { nullable: true })
  userId?: string | null;
}

@InputType()
export class TwoFactorCodeInput {
  @Field(() => String)
  code!: string;

  @Field(() => String, { nullable: true })
  userId?: string | null;
}

const userIdArg = z.object({ userId: zUuid().nullish() });
const codeInput = z.object({
  code: zChars({ trim: true, min: 1, minMessage: 'is required', max: 64 }),
  userId: zUuid().nullish(),
});
const setupInput = z.object({
  platformId: zChars({ trim: true, min: 1, max: 100 }).nullish(),
  userId: zUuid().nullish(),
});

function parse<T extends z.ZodTypeAny>(schema: T, value: unknown, where: string): z.infer<T> {
  const r = schema.safeParse(value);
  if (!r.success) throw validationError(r.error, where);
  return r.data;
}

const meta = (ctx: GqlContext) => ({ ...gqlAttribution(ctx), acceptLanguage: ctx.header('accept-language') });

@Resolver()
export class TwoFactorResolver {
  @Query(() => GqlTwoFactorStatus, { nullable: true })
  async twoFactorStatus(
    @Arg('userId', () => String, { nullable: true }) userId: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<GqlTwoFactorStatus> {
    const args = parse(userIdArg, { userId }, 'args');
    const target = await authorizeTwoFactor(ctx.services, ctx.principal, 'read', args.userId);
    await loadUser(ctx.services.db, target);
    const s = presentTwoFactorStatus(await twoFactorState(ctx.services.db, target));
    return {
      enabled: s.enabled,
      enabledAt: s.enabled_at,
      setupPlatform: s.setup_platform,
      backupCodesRemaining: s.backup_codes_remaining,
    };
  }

  @Query(() => GqlTwoFactorRequirement, { nullable: true })
  async userRequiresTwoFactor(
    @Arg('userId', () => String, { nullable: true }) userId: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<GqlTwoFactorRequirement> {
    const args = parse(userIdArg, { userId }, 'args');
    const target = await authorizeTwoFactor(ctx.services, ctx.principal, 'read', args.userId);
    await loadUser(ctx.services.db, target);
    const r = await twoFactorRequirement(ctx.services.db, target);
    return { required: r.required, requiredByRoles: r.required_by_roles, enabled: r.enabled, canEnable: r.can_enable };
  }

  @Mutation(() => GqlTwoFactorSetup, { nullable: true })
  async setupTwoFactor(
    @Arg('input', () => SetupTwoFactorInput, { nullable: true }) input: SetupTwoFactorInput | null,
    @Ctx() ctx: GqlContext,
  ): Promise<GqlTwoFactorSetup> {
    const i = parse(setupInput, { ...input }, 'input');
    const target = await authorizeTwoFactor(ctx.services, ctx.principal, 'write', i.userId);
    const s = await setupTwoFactor(ctx.services, target, i.platformId);
    return {
      secret: s.secret,
      qrCodeUrl: s.qr_code_url,
      qrCodeImage: s.qr_code_image,
      expiresAt: s.expires_at,
      platformSlug: s.platform_slug,
    };
  }

  @Mutation(() => GqlBackupCodes, { nullable: true })
  async verifyTwoFactor(
    @Arg('input', () => TwoFactorCodeInput) input: TwoFactorCodeInput,
    @Ctx() ctx: GqlContext,
  ): Promise<GqlBackupCodes> {
    const i = parse(codeInput, { ...input }, 'input');
    const target = await authorizeTwoFactor(ctx.services, ctx.principal, 'write', i.userId);
    const r = await verifyTwoFactor(ctx.services, target, i.code, meta(ctx));
    return { backupCodes: r.backup_codes, message: r.message, platformSlug: r.platform_slug, success: r.success };
  }

  @Mutation(() => Boolean, { nullable: true, description: 'true once 2FA is off' })
  async disableTwoFactor(
    @Arg('input', () => TwoFactorCodeInput) input: TwoFactorCodeInput,
    @Ctx() ctx: GqlContext,
  ): Promise<boolean> {
    const i = parse(codeInput, { ...input }, 'input');
    const target = await authorizeTwoFactor(ctx.services, ctx.principal, 'write', i.userId);
    return (await disableTwoFactor(ctx.services, target, i.code, meta(ctx))).success;
  }

  @Mutation(() => GqlBackupCodes, { nullable: true })
  async regenerateBackupCodes(
    @Arg('input', () => TwoFactorCodeInput) input: TwoFactorCodeInput,
    @Ctx() ctx: GqlContext,
  ): Promise<GqlBackupCodes> {
    const i = parse(codeInput, { ...input }, 'input');
    const target = await authorizeTwoFactor(ctx.services, ctx.principal, 'write', i.userId);
    const r = await regenerateBackupCodes(ctx.services, target, i.code, meta(ctx));
    return { backupCodes: r.backup_codes, message: r.message, platformSlug: r.platform_slug, success: r.success };
  }
}
