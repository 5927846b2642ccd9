import { Ctx, Field, ObjectType, Query, Resolver } from 'type-graphql';
import { requireAuthenticated } from '../../shared/policies';
import { GqlMeShape, presentGqlMe } from '../../shared/presenters/graphqlAccounts';
import type { GqlContext } from './context';

@ObjectType({ description: 'The caller as the service sees it' })
export class Me implements GqlMeShape {
  @Field(() => String, { nullable: true })
  userId!: string | null;

  @Field(() => String, { nullable: true, description: 'null for users' })
  apiKeyId!: string | null;

  @Field(() => [String], { description: 'Role names' })
  roles!: string[];

  @Field(() => [String])
  permissions!: string[];

  @Field(() => Boolean)
  isSuperAdmin!: boolean;
}

@Resolver()
export class MeResolver {
  @Query(() => Me)
  async me(@Ctx() ctx: GqlContext): Promise<Me> {
    const p = ctx.principal;
    requireAuthenticated(p);
    const roleIds = p.kind === 'system' ? [] : p.roleIds;
    const roles: Array<{ name: string }> = roleIds.length
      ? await ctx.services.db('roles').whereIn('id', roleIds).orderBy('name').select('name')
      : [];
    return presentGqlMe(
      p,
      roles.map((r) => r.name),
    );
  }
}
