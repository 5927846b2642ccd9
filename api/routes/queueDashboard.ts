import Router from '@koa/router';
import { QUEUE_DASHBOARD_COOKIE, QUEUE_DASHBOARD_PATH } from '../queueDashboard';
import { noContent } from '../responses';
import { AppState, defineRoute } from '../routing';
import type { ApiServices } from '../services';

/** POST /v1/admin/queues/session: hands the caller's Bearer session token to the browser as the dashboard cookie. */
export function queueDashboardRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'post',
      path: `${QUEUE_DASHBOARD_PATH}/session`,
      summary: 'Open the queue dashboard in a browser: sets an HttpOnly cookie with this session token',
      description:
        'The dashboard itself (Bull Board: its pages under /v1/admin/queues and the JSON API they call) is an operator UI ' +
        'for browsers, not part of this document or of the public interface; it needs admin:read like this route.',
      tags: ['admin'],
      auth: { permission: 'admin:read' },
      responses: { 204: { description: 'Cookie set; open /v1/admin/queues' } },
    },
    async (ctx) => {
      ctx.cookies.set(QUEUE_DASHBOARD_COOKIE, ctx.state.token ?? '', {
        httpOnly: true,
        sameSite: 'strict',
        secure: ctx.secure,
        path: QUEUE_DASHBOARD_PATH,
        maxAge: 8 * 3600 * 1000,
        overwrite: true,
      });
      noContent(ctx);
    },
  );
}
