import { Ctx, Field, Int, Mutation, ObjectType, Resolver } from 'type-graphql';
import { mintWsTicket } from '../../shared/auth/wsTickets';
import type { GqlContext } from './context';

@ObjectType({
  simpleResolvers: true,
  description: "Single-use WebSocket ticket: open /v1/ws with subprotocols ['service-ticket', ticket]",
})
export class WsTicket {
  @Field(() => String)
  ticket!: string;

  @Field(() => Int, { description: 'Seconds until the ticket expires' })
  expiresIn!: number;
}

@Resolver()
export class WsTicketResolver {
  /** GraphQL twin of POST /v1/ws/ticket: user credentials only (API keys get Forbidden). */
  @Mutation(() => WsTicket, { nullable: true })
  async mintWsTicket(@Ctx() ctx: GqlContext): Promise<WsTicket> {
    return mintWsTicket(ctx.services.redis, ctx.services.config, ctx.principal);
  }
}
