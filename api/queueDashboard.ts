import type { IServerAdapter } from '@bull-board/api/typings/app';
import type { Middleware } from 'koa';
import { HttpError, serviceUnavailable } from '../shared/errors';
import { authorize, subjects } from '../shared/policies';
import { QueueName } from '../shared/queues';
import type { AppContext } from './routing';
import type { ApiServices } from './services';
import { isRoutePath, isUnderRoutePath } from '../shared/routePaths';

export const QUEUE_DASHBOARD_PATH = '/v1/admin/queues';
/** HttpOnly cookie a browser holds the session token in for the dashboard (set by POST …/session). */
export const QUEUE_DASHBOARD_COOKIE = 'queue_dashboard_session';
/** Bull Board's JSON API (queues, jobs, retries, Redis stats): every call reads or writes Redis. */
const QUEUE_DASHBOARD_API = `${QUEUE_DASHBOARD_PATH}/api`;

/**
 * Bull Board mounted at /v1/admin/queues, showing every queue of the registry (shared/queues.ts):
 * counts, jobs, failed jobs with their errors, retries. Access is `queueDashboard.view` in
 * shared/policies.ts (admin:read). A script sends its session token as `Authorization: Bearer`; a
 * browser, which cannot add headers to page loads, first calls POST /v1/admin/queues/session with
 * the header and then carries the token in an HttpOnly, SameSite=Strict cookie scoped to this path.
 * Its actions (retry, remove, clean, pause: any method but GET, HEAD and OPTIONS) are
 * `queueDashboard.manage`: a super admin.
 */
export function queueDashboard(services: ApiServices): Middleware {
  // Built on the first dashboard request: the app can be assembled (e.g. to read its route table)
  // without the queue connections, and Bull Board's modules (~0.3 s of CPU to load) are loaded
  // only by a process that serves the dashboard.
  let board: Promise<Middleware> | undefined;
  const boardFor = (): Promise<Middleware> =>
    (board ??= buildBoard().catch((err: unknown) => {
      board = undefined;
      throw err;
    }));
  const buildBoard = async (): Promise<Middleware> => {
    const [{ createBullBoard }, { BullMQAdapter }, { KoaAdapter }] = await Promise.all([
      import('@bull-board/api'),
      import('@bull-board/api/bullMQAdapter'),
      import('@bull-board/koa'),
    ]);
    const adapter = new KoaAdapter();
    adapter.setBasePath(QUEUE_DASHBOARD_PATH);
    createBullBoard({
      queues: (Object.values(QueueName) as QueueName[]).map((n) => new BullMQAdapter(services.queues.queue(n))),
      // @bull-board/koa pins its own patch release of @bull-board/api: same interface, separate declarations.
      serverAdapter: adapter as unknown as IServerAdapter,
      options: { uiConfig: { boardTitle: 'Queues' } },
    });
    return adapter.registerPlugin() as Middleware;
  };
  const serve: Middleware = async (ctx, next) => {
    const c = ctx as unknown as AppContext;
    if (c.state.principal.kind === 'anonymous') {
      const token = ctx.cookies.get(QUEUE_DASHBOARD_COOKIE);
      if (token) {
        const result = await c.services.credentials.resolve(token);
        if (result.ok) c.state.principal = result.principal;
      }
    }
    // Pages and reads need admin:read; the board's actions (every other method) a super admin.
    const reading = ctx.method === 'GET' || ctx.method === 'HEAD' || ctx.method === 'OPTIONS';
    authorize(c.state.principal, reading ? 'view' : 'manage', subjects.queueDashboard());
    // Bull Board's pages are not ours to cache, and no other site may frame them (its buttons
    // retry and remove jobs with the dashboard's cookie).
    ctx.set('Cache-Control', 'no-store');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('Content-Security-Policy', "frame-ancestors 'none'");
    if (isUnderRoutePath(ctx.path, QUEUE_DASHBOARD_API)) await redisAnswers(c.services);
    // The board is given a `next` of its own: whatever runs after it (the router's 404 and 405 with
    // Allow) must run outside Bull Board's error handler, which answers every error with a 500.
    const boardMiddleware = await boardFor();
    await boardMiddleware(ctx, async () => undefined);
    // A path the board does not have: the router's 404.
    if (ctx.status === 404 && ctx.body == null) return next();
    // Bull Board's router refuses a method of a path it has with a bare 501 or 405: answered as
    // every other path of the API answers it (IndexedRouter.allowedMethods).
    if ((ctx.status === 501 || ctx.status === 405) && ctx.body == null) {
      const allow = ctx.response.get('Allow');
      throw new HttpError(
        405,
        'MethodNotAllowed',
        `method ${ctx.method} not allowed on ${ctx.path}; allowed: ${allow}`,
        undefined,
        allow ? { Allow: allow } : undefined,
      );
    }
  };
  // Every other request passes straight on: no promise of this middleware's own.
  return (ctx, next) => {
    const path = ctx.path;
    if (!isUnderRoutePath(path, QUEUE_DASHBOARD_PATH)) return next();
    if (isRoutePath(path, `${QUEUE_DASHBOARD_PATH}/session`)) return next(); // a regular route (api/routes/queueDashboard.ts)
    return serve(ctx, next);
  };
}

/**
 * A 503 unless Redis answers a PING on the fail-fast connection (at once when disconnected, within
 * its 1 s command timeout when it stopped answering). BullMQ waits without a limit for a queue's
 * first connection, so Bull Board's API would otherwise hang while Redis is unreachable.
 */
async function redisAnswers(services: ApiServices): Promise<void> {
  try {
    await services.redis.ping();
  } catch {
    throw serviceUnavailable('the queues are unavailable while Redis is unreachable; try again shortly');
  }
}
