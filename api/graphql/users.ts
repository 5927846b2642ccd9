import { Arg, Args, Ctx, Field, ObjectType, Query, Resolver } from 'type-graphql';
import { Role } from '../../shared/models/Role';
import { User } from '../../shared/models/User';
import { authorizePermission } from '../../shared/policies';
import { camelKeys, CamelKeys } from '../../shared/presenters/camel';
import { presentRole, roleSchema } from '../../shared/presenters/role';
import { presentUser, userSchema } from '../../shared/presenters/user';
import { findOr404 } from '../../shared/rowLoader';
import { versionedValue } from '../../shared/caches/tableVersions';
import type { z } from '../../shared/zod';
import { GqlContext, idArg } from './context';
import { listCost, PageArgs, pageOf, PageOf } from './pagination';
import { byName } from '../../shared/queries/byName';

@ObjectType('User', { simpleResolvers: true, description: 'A user, as GET /v1/users/{id} shows it' })
export class GqlUser implements CamelKeys<z.infer<typeof userSchema>> {
  @Field(() => String) id!: string;
  @Field(() => String) username!: string;
  @Field(() => String, { nullable: true }) primaryPlatformAccountId!: string | null;
  @Field(() => String) createdAt!: string;
  @Field(() => String) updatedAt!: string;
  @Field(() => String, { nullable: true }) lastLoginAt!: string | null;
  @Field(() => String, { nullable: true, description: 'Set while a deletion is scheduled or done' })
  deletedAt!: string | null;
  @Field(() => Boolean) privacyMode!: boolean;
  @Field(() => String, { nullable: true }) preferredLocale!: string | null;
  @Field(() => Boolean) avatarsEnabled!: boolean;
}

@ObjectType('UserPage', { simpleResolvers: true })
export class GqlUserPage extends PageOf(GqlUser) {}

@ObjectType('Role', { simpleResolvers: true })
export class GqlRole implements CamelKeys<z.infer<typeof roleSchema>> {
  @Field(() => String) id!: string;
  @Field(() => String) name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field(() => Boolean) isSystem!: boolean;
  @Field(() => Boolean, { description: 'Holders must have two-factor authentication enabled' })
  requiresTwoFactor!: boolean;
  @Field(() => String) createdAt!: string;
  @Field(() => String) updatedAt!: string;
}

/** Users (users:read, or oneself for user(id)) and roles (roles:read), as their REST reads. */
/** Every role, presented, kept while the roles table is unchanged (versionedValue). */
const roleLists = versionedValue<GqlRole[]>(['roles']);

@Resolver()
export class UserResolver {
  @Query(() => GqlUser, { nullable: true, description: 'A user: yourself, or anyone with users:read.' })
  async user(@Arg('id', () => String) id: string, @Ctx() ctx: GqlContext): Promise<GqlUser> {
    authorizePermission(ctx.principal, 'users:read', { selfId: id });
    return camelKeys(presentUser(await findOr404(User, idArg(id), 'user')));
  }

  @Query(() => GqlUserPage, {
    nullable: true,
    description: 'Users, oldest first. Needs users:read.',
    complexity: listCost(20),
  })
  users(
    @Args(() => PageArgs) args: PageArgs,
    @Ctx() ctx: GqlContext,
    @Arg('includeDeleted', () => Boolean, { defaultValue: false }) includeDeleted: boolean,
  ): Promise<GqlUserPage> {
    authorizePermission(ctx.principal, 'users:read');
    const q = User.query(ctx.services.db).orderBy('created_at', 'asc').orderBy('id');
    if (!includeDeleted) q.whereNull('deleted_at');
    return pageOf(q, args, (u) => camelKeys(presentUser(u)), { counter: includeDeleted ? 'users_all' : 'users_live' });
  }

  @Query(() => [GqlRole], { nullable: true, description: 'Every role by name. Needs roles:read.' })
  async roles(@Ctx() ctx: GqlContext): Promise<GqlRole[]> {
    authorizePermission(ctx.principal, 'roles:read');
    const db = ctx.services.db;
    return roleLists(db, async () => (await Role.query(db).orderByRaw(byName())).map((r) => camelKeys(presentRole(r))));
  }
}
