import type Router from '@koa/router';
import { mintWsTicket } from '../../shared/auth/wsTickets';
import { z } from '../../shared/zod';
import { defineRoute, AppState } from '../routing';
import type { ApiServices } from '../services';
import { created } from '../responses';

const ticketBody = z.object({
  ticket: z.string().openapi({ description: "Open the socket with subprotocols ['service-ticket', ticket]" }),
  expiresIn: z.number().int().openapi({ description: 'Seconds until the ticket expires' }),
});

/** POST /v1/ws/ticket: trades a user credential for a single-use WebSocket ticket (spec §4.26). */
export function wsTicketRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/ws/ticket',
      summary: 'Mint a single-use, short-lived WebSocket ticket',
      description:
        "The ticket authenticates one WebSocket upgrade on /v1/ws when sent as the subprotocol list ['service-ticket', <ticket>]. It works once and expires after `expiresIn` seconds. Needs a user credential: API keys get 403 (they connect with an Authorization header instead).",
      tags: ['websocket'],
      auth: 'authenticated',
      responses: {
        201: { description: 'The ticket', schema: ticketBody },
        401: { description: 'Not authenticated' },
        403: { description: 'API-key-only credential' },
      },
    },
    async (ctx) => {
      const s = ctx.services;
      created(ctx, await mintWsTicket(s.redis, s.config, ctx.state.principal));
    },
  );
}
