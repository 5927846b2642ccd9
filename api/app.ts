import type { GraphQLSchema } from 'graphql';
import Koa from 'koa';
import { IndexedRouter } from './indexedRouter';
import { authenticate, rejectFailedCredentials } from './middleware/auth';
import { bodyParser } from './middleware/body';
import { errorHandler } from './middleware/errors';
import { rateLimit } from './middleware/rateLimit';
import { graphqlRoutes } from './graphql';
import { queueDashboard } from './queueDashboard';
import { routeModules } from './routes';
import type { AppState } from './routing';
import type { ApiServices } from './services';

/**
 * The Koa application: errors (which also compresses answers) → body parsing → authentication (+ system-key allowlist) → rate
 * limiting → credential failures → routes. Every route then runs the chain of api/routing.ts.
 */
export function createApp(services: ApiServices, schema: GraphQLSchema): Koa<AppState, { services: ApiServices }> {
  const app = new Koa<AppState, { services: ApiServices }>();
  app.proxy = services.config.trustProxy;
  app.context.services = services;
  app.silent = true;

  const router = new IndexedRouter<AppState, { services: ApiServices }>();
  for (const mount of routeModules) mount(router);
  graphqlRoutes(router, schema, services.config.env === 'production');

  app.use(errorHandler(services.logger));
  app.use(bodyParser());
  app.use(authenticate());
  app.use(rateLimit(services.config));
  app.use(rejectFailedCredentials());
  app.use(queueDashboard(services));
  app.use(router.routes());
  app.use(router.allowedMethods());
  return app;
}
