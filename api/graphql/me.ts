import { Ctx, Field, ObjectType, Query, Resolver } from 'type-graphql';
import { requireAuthenticated } from '../../shared/policies';
import { GqlMeShape, presentGqlMe } from '../../shared/presenters/graphqlAccounts';
import { Role } from '../../shared/models/Role';
import { rowById } from '../../shared/rowLoader';
import type { GqlContext } from './context';

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

@ObjectType({ simpleResolvers: true, description: 'The caller as the service sees it' })
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
  @Query(() => Me, { nullable: true })
  async me(@Ctx() ctx: GqlContext): Promise<Me> {
    const p = ctx.principal;
    requireAuthenticated(p);
    const roleIds = p.kind === 'system' ? [] : p.roleIds;
    // By primary key through the batched row loader: concurrent callers share one statement.
    const roles = await Promise.all(roleIds.map((id) => rowById(Role, ctx.services.db).load(id)));
    const names = roles.flatMap((r) => (r ? [r.name] : [])).sort(byName);
    return presentGqlMe(p, names);
  }
}
