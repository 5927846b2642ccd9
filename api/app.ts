import type { GraphQLSchema } from 'graphql';
import Koa from 'koa';
import { HttpError } from '../shared/errors';
import { UPGRADE_REQUIRED, WS_PATH } from '../shared/httpEdge';
import { isRoutePath } from '../shared/routePaths';
import { IndexedRouter } from './indexedRouter';
import { believeOnlyAddresses } from './params';
import { authenticate, confirmCredential, rejectFailedCredentials } from './middleware/auth';
import { bodyParser } from './middleware/body';
import { errorHandler } from './middleware/errors';
import { rateLimit } from './middleware/rateLimit';
import { graphqlRoutes } from './graphql';
import { queueDashboard } from './queueDashboard';
import { routeModules } from './routes';
import { accessBeforeBody, AppState, routeTraits } from './routing';
import type { ApiServices } from './services';

export type ApiApp = Koa<AppState, { services: ApiServices }> & {
  /** The route pattern `method` and `path` match (`/v1/sessions/:token`), as logged; undefined for none. */
  routePattern(method: string, path: string): string | undefined;
};

/**
 * The Koa application: errors (which also compresses answers) → authentication (+ system-key
 * allowlist) → rate limiting → credential failures → body parsing → credential re-check → routes.
 * Every route then runs the chain of api/routing.ts.
 */
export function createApp(services: ApiServices, schema: GraphQLSchema): ApiApp {
  const app = new Koa<AppState, { services: ApiServices }>() as ApiApp;
  // Behind proxies, only the entries they appended to X-Forwarded-For are believed: the leftmost
  // ones are whatever the client sent, and would choose its own rate-limit and sign-in counters.
  app.proxy = services.config.trustProxyHops > 0;
  app.maxIpsCount = services.config.trustProxyHops;
  believeOnlyAddresses(app);
  app.context.services = services;
  app.silent = true;

  const router = new IndexedRouter<AppState, { services: ApiServices }>();
  for (const mount of routeModules) mount(router);
  graphqlRoutes(router, schema, services.config.env === 'production');
  // What a route declares, for the middleware that decides before it runs (a credential it checks
  // itself, the format of its errors).
  const routeOf = (ctx: Koa.Context) => routeTraits(router, ctx.method, ctx.path);
  app.routePattern = (method, path) => {
    const layer = router.match(path, method).pathAndMethod.find((l) => l.methods.length > 0);
    return typeof layer?.path === 'string' ? layer.path : undefined;
  };

  app.use(errorHandler(services.logger, routeOf, services.dbOutages));
  // /v1/ws is a WebSocket endpoint, forwarded on 'upgrade' (api/server.ts): a plain request is told so.
  app.use((ctx, next) => {
    if (!isRoutePath(ctx.path, WS_PATH)) return next();
    throw new HttpError(UPGRADE_REQUIRED.status, 'UpgradeRequired', UPGRADE_REQUIRED.message, undefined, {
      ...UPGRADE_REQUIRED.headers,
    });
  });
  // The credential, the rate limit and the route's access rule before the body: a request refused
  // by any (or over its limit) is answered without reading or parsing what it sent (up to 4 MB of JSON), and every
  // request is counted, whatever its body. The connection of a request answered before its body
  // arrived is closed (errorHandler), so the body is never read. A credential that changed while
  // the body was arriving is checked again once it is in (confirmCredential): a revocation during
  // a slow upload holds for it.
  app.use(authenticate(routeOf));
  app.use(rateLimit(services.config));
  app.use(rejectFailedCredentials());
  app.use(accessBeforeBody(routeOf));
  app.use(bodyParser());
  app.use(confirmCredential());
  app.use(queueDashboard(services));
  app.use(router.routes());
  app.use(router.allowedMethods());
  return app;
}
