import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import type { IServerAdapter } from '@bull-board/api/typings/app';
import { KoaAdapter } from '@bull-board/koa';
import type { Middleware } from 'koa';
import { authorize, subjects } from '../shared/policies';
import { QueueName } from '../shared/queues';
import type { AppContext } from './routing';
import type { ApiServices } from './services';

export const QUEUE_DASHBOARD_PATH = '/v1/admin/queues';
/** HttpOnly cookie a browser holds the session token in for the dashboard (set by POST …/session). */
export const QUEUE_DASHBOARD_COOKIE = 'queue_dashboard_session';

/**
 * Bull Board mounted at /v1/admin/queues, showing every queue of the registry (shared/queues.ts):
 * counts, jobs, failed jobs with their errors, retries. Access is `queueDashboard.view` in
 * shared/policies.ts (admin:read). A script sends its session token as `Authorization: Bearer`; a
 * browser, which cannot add headers to page loads, first calls POST /v1/admin/queues/session with
 * the header and then carries the token in an HttpOnly, SameSite=Strict cookie scoped to this path.
 */
export function queueDashboard(services: ApiServices): Middleware {
  // Built on the first dashboard request: the app can be assembled (e.g. to read its route table)
  // without the queue connections.
  let board: Middleware | undefined;
  const boardFor = (): Middleware => {
    if (board) return board;
    const adapter = new KoaAdapter();
    adapter.setBasePath(QUEUE_DASHBOARD_PATH);
    createBullBoard({
      queues: (Object.values(QueueName) as QueueName[]).map((n) => new BullMQAdapter(services.queues.queue(n))),
      // @bull-board/koa pins its own patch release of @bull-board/api: same interface, separate declarations.
      serverAdapter: adapter as unknown as IServerAdapter,
      options: { uiConfig: { boardTitle: 'Queues' } },
    });
    board = adapter.registerPlugin() as Middleware;
    return board;
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
    authorize(c.state.principal, 'view', subjects.queueDashboard());
    // Bull Board's pages are not ours to cache or frame.
    ctx.set('Cache-Control', 'no-store');
    return boardFor()(ctx, next);
  };
  // Every other request passes straight on: no promise of this middleware's own.
  return (ctx, next) => {
    const path = ctx.path;
    if (path !== QUEUE_DASHBOARD_PATH && !path.startsWith(`${QUEUE_DASHBOARD_PATH}/`)) return next();
    if (path === `${QUEUE_DASHBOARD_PATH}/session`) return next(); // a regular route (api/routes/queueDashboard.ts)
    return serve(ctx, next);
  };
}
