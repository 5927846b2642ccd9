import type Router from '@koa/router';
import type { AppState } from '../routing';
import type { ApiServices } from '../services';
import { healthRoutes } from './health';
import { infoRoutes } from './info';
import { openApiRoutes } from './openapi';
import { sessionRoutes } from './sessions';
import { wsTicketRoutes } from './wsTicket';

type ApiRouter = Router<AppState, { services: ApiServices }>;

/** Every REST router module, in mounting order. Add a resource by adding its function here. */
export const routeModules: Array<(router: ApiRouter) => void> = [healthRoutes, infoRoutes, openApiRoutes, sessionRoutes, wsTicketRoutes];
