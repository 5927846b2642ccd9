import { Arg, Ctx, Field, InputType, Mutation, ObjectType, Query, Resolver } from 'type-graphql';
import { oauthSignin, oauthSigninSchema } from '../../shared/commands/oauthSignin';
import { validationError } from '../../shared/errors';
import { Platform } from '../../shared/models/Platform';
import { authorize, requireAuthenticated, requireSystem, subjects } from '../../shared/policies';
import { userIdOfPlatformAccount } from '../../shared/queries/users';
import { versionedValue } from '../../shared/caches/tableVersions';
import {
  GqlFlatUserShape,
  GqlPlatformShape,
  presentGqlFlatUser,
  presentGqlPlatform,
} from '../../shared/presenters/graphqlAccounts';
import { GqlContext, gqlAttribution } from './context';
import { byName } from '../../shared/queries/byName';

@ObjectType('Platform', { simpleResolvers: true, description: 'A sign-in platform' })
export class GqlPlatform implements GqlPlatformShape {
  @Field(() => String)
  id!: string;

  @Field(() => String)
  name!: string;

  @Field(() => String)
  slug!: string;

  @Field(() => Boolean)
  enabled!: boolean;

  @Field(() => Boolean, { description: '2FA can be set up from this platform' })
  twoFactorSupported!: boolean;

  @Field(() => Boolean, { description: '2FA is required to use this platform' })
  twoFactorRequired!: boolean;
}

@InputType({ description: 'A provider sign-in relayed by the first-party app' })
export class OauthSigninInput {
  @Field(() => String, { nullable: true })
  email?: string | null;

  @Field(() => String)
  name!: string;

  @Field(() => String, { description: 'Platform slug' })
  oauthProvider!: string;

  @Field(() => String)
  oauthProviderId!: string;

  @Field(() => String, { nullable: true })
  image?: string | null;
}

@ObjectType('FlatUser', {
  simpleResolvers: true,
  description: 'The flattened user of provider sign-in and user-by-email',
})
export class GqlFlatUser implements GqlFlatUserShape {
  @Field(() => String)
  id!: string;

  @Field(() => String, { nullable: true })
  primaryPlatformAccountId!: string | null;

  @Field(() => String)
  username!: string;

  @Field(() => String, { nullable: true })
  email!: string | null;

  @Field(() => String, { nullable: true })
  avatarUrl!: string | null;

  @Field(() => String, { nullable: true })
  platform!: string | null;

  @Field(() => String, { nullable: true })
  createdAt!: string | null;

  @Field(() => String, { nullable: true })
  updatedAt!: string | null;

  @Field(() => String, { nullable: true })
  lastLoginAt!: string | null;

  @Field(() => Boolean)
  privacyMode!: boolean;

  @Field(() => Boolean)
  isBanned!: boolean;

  @Field(() => Boolean, {
    nullable: true,
    description:
      'oauthSignin only: 2FA is required for this user (roles, platforms) but not enabled; send the user to the 2FA setup',
  })
  twoFactorSetupRequired?: boolean | null;
}

/** Every platform, presented, kept while the platforms table is unchanged (versionedValue). */
const allPlatforms = versionedValue<GqlPlatform[]>(['platforms']);

/** Accounts in GraphQL: platforms, the oauthSignin twin of POST /v1/users/oauth, findUserByPlatform. */
@Resolver()
export class AccountsResolver {
  @Query(() => [GqlPlatform], { nullable: true, description: 'Sign-in platforms (no authentication needed)' })
  async platforms(@Ctx() ctx: GqlContext): Promise<GqlPlatform[]> {
    const db = ctx.services.db;
    return allPlatforms(db, async () => (await Platform.query(db).orderByRaw(byName())).map(presentGqlPlatform));
  }

  /** System key only, like POST /v1/users/oauth. */
  @Mutation(() => GqlFlatUser, { nullable: true })
  async oauthSignin(
    @Arg('input', () => OauthSigninInput) input: OauthSigninInput,
    @Ctx() ctx: GqlContext,
  ): Promise<GqlFlatUser> {
    requireSystem(ctx.principal, 'only the system key may call oauthSignin');
    const parsed = oauthSigninSchema.safeParse({ ...input });
    if (!parsed.success) throw validationError(parsed.error, 'input');
    const b = parsed.data;
    const signin = {
      email: b.email ?? null,
      name: b.name,
      oauthProvider: b.oauthProvider,
      oauthProviderId: b.oauthProviderId,
      image: b.image ?? null,
    };
    const { user, twoFactorSetupRequired } = await oauthSignin(ctx.services, signin, gqlAttribution(ctx));
    return { ...presentGqlFlatUser(user), twoFactorSetupRequired };
  }

  /**
   * The id of the user a platform account belongs to, null when unlinked: for the system key and
   * users:read, anyone's; for anyone else, their own account only.
   */
  @Query(() => String, { nullable: true })
  async findUserByPlatform(
    @Arg('platformSlug', () => String) platformSlug: string,
    @Arg('platformUserId', () => String) platformUserId: string,
    @Ctx() ctx: GqlContext,
  ): Promise<string | null> {
    // Only an authenticated caller looks at all; whose account it is then decides (a refusal of
    // another user's account and of an unlinked one read the same, so nothing leaks).
    requireAuthenticated(ctx.principal);
    const userId = (await userIdOfPlatformAccount(ctx.services.db, platformSlug, platformUserId)) ?? null;
    authorize(ctx.principal, 'readAccount', subjects.userLookup(userId));
    return userId;
  }
}
