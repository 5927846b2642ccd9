import test from 'ava';
import Router from '@koa/router';
import { IndexedRouter } from '../../api/indexedRouter';
import { routeModules } from '../../api/routes';

/** Registers the app's real route table on a plain @koa/router and on the indexed one. */
function both() {
  const plain = new Router();
  const indexed = new IndexedRouter();
  for (const mount of routeModules) {
    mount(plain as never);
    mount(indexed as never);
  }
  for (const r of [plain, indexed] as Router[]) {
    r.get('/v1/:anything/weird', () => undefined);
    r.use((_ctx, next) => next());
  }
  return { plain, indexed };
}

const summary = (m: Router.RoutesMatch) => ({
  route: m.route,
  path: m.path.map((l) => `${l.methods.join(',')} ${String(l.path)}`),
  pathAndMethod: m.pathAndMethod.map((l) => `${l.methods.join(',')} ${String(l.path)}`),
});

test('matches exactly what @koa/router matches, in the same order', (t) => {
  const { plain, indexed } = both();
  const paths = [
    '/v1',
    '/v1/',
    '/V1',
    '/health',
    '/HEALTH/',
    '/v1/health',
    '/v1/users',
    '/v1/users/',
    '/v1/users/me',
    '/v1/Users/ME',
    '/v1/users/123e4567-e89b-12d3-a456-426614174000',
    '/v1/users/x/roles',
    '/v1/trips/abc/history',
    '/v1/gps/batch',
    '/v1/gps/current/devices',
    '/v1/swagger-ui/',
    '/v1/swagger-ui/swagger-ui.css',
    '/v1/nope',
    '/nope',
    '/',
    '',
    '/v1/foo/weird',
    '//v1',
    '/v1//users',
    '/v1/users//me',
    '/v1/internal/audit',
    '/v1/sessions/sess_abc',
    '/v1/oauth/token',
    '/v1/gql',
    '/v1/schema',
  ];
  for (const path of paths) {
    for (const method of ['GET', 'POST', 'PATCH', 'DELETE', 'PUT', 'HEAD']) {
      t.deepEqual(summary(indexed.match(path, method)), summary(plain.match(path, method)), `${method} ${path}`);
    }
  }
});

test('every route of the table, filled and bent (case, trailing delimiters, segments added or dropped), matches as with @koa/router', (t) => {
  const { plain, indexed } = both();
  const values = ['me', '123e4567-e89b-12d3-a456-426614174000', 'A%2FB', 'x y', 'Ω'];
  const paths = new Set<string>();
  for (const layer of plain.stack) {
    if (typeof layer.path !== 'string') continue;
    for (const v of values) {
      const filled = layer.path.replace(/:[A-Za-z_][A-Za-z0-9_]*/g, v);
      for (const p of [filled, filled.toUpperCase(), `${filled}/`, `${filled}#`, `${filled}?`, `${filled}//`])
        paths.add(p);
      paths.add(`${filled}/extra`);
      paths.add(filled.replace(/\/[^/]*$/, ''));
      paths.add(filled.replace('/v1/', '/v1//'));
    }
  }
  t.true(paths.size > 1000, `${paths.size} paths`);
  for (const path of paths) {
    for (const method of ['GET', 'POST', 'DELETE']) {
      const a = summary(indexed.match(path, method));
      const b = summary(plain.match(path, method));
      if (JSON.stringify(a) !== JSON.stringify(b)) t.deepEqual(a, b, `${method} ${path}`);
    }
  }
  t.pass();
});

test('routes added after the first match are found (the index rebuilds)', (t) => {
  const r = new IndexedRouter();
  r.get('/v1/a', () => undefined);
  t.true(r.match('/v1/a', 'GET').route);
  r.get('/v1/b', () => undefined);
  t.true(r.match('/v1/b', 'GET').route);
});

/** Runs one GET through a router's middleware and returns what the handler saw. */
async function dispatch(router: Router, path: string, after?: () => void, method = 'GET') {
  const ctx: Record<string, unknown> = { path, method, request: {}, params: undefined };
  await router.routes()(ctx as never, async () => after?.());
  return ctx;
}

test('a single-handler route is dispatched with the params and route fields @koa/router sets', async (t) => {
  const seen: Record<string, unknown>[] = [];
  const make = (r: Router) => {
    r.get(
      'route-name',
      '/v1/things/:id/parts/:part',
      (ctx) =>
        void seen.push({
          params: { ...ctx.params },
          request: { ...(ctx.request as { params?: object }).params },
          routerPath: (ctx as never as { routerPath: string }).routerPath,
          routerName: (ctx as never as { routerName: string }).routerName,
          matched: (ctx as never as { _matchedRoute: string })._matchedRoute,
          matchedName: (ctx as never as { _matchedRouteName: string })._matchedRouteName,
          captures: (ctx as never as { captures: string[] }).captures,
        }),
    );
    return r;
  };
  await dispatch(make(new Router()), '/v1/things/a%20b/parts/7');
  await dispatch(make(new IndexedRouter() as unknown as Router), '/v1/things/a%20b/parts/7');
  t.is(seen.length, 2);
  t.deepEqual(seen[1], seen[0]);
  t.deepEqual(seen[1].params, { id: 'a b', part: '7' });
  t.is(seen[1].matchedName, 'route-name');
});

test('a handler that calls next reaches the middleware after the router; no match calls next once', async (t) => {
  const r = new IndexedRouter();
  r.get('/v1/pass', (_ctx, next) => next());
  let after = 0;
  await dispatch(r as unknown as Router, '/v1/pass', () => after++);
  t.is(after, 1);
  await dispatch(r as unknown as Router, '/v1/none', () => after++);
  t.is(after, 2);
});

test('several layers on one path (router middleware, two handlers) run in order as with @koa/router', async (t) => {
  const order: string[] = [];
  const make = (r: Router, tag: string) => {
    r.use(async (_ctx, next) => {
      order.push(`${tag}:use`);
      await next();
    });
    r.get('/v1/x/:id', async (_ctx, next) => {
      order.push(`${tag}:first`);
      await next();
    });
    r.get('/v1/x/:id', (ctx) => void order.push(`${tag}:second:${ctx.params.id}`));
    return r;
  };
  await dispatch(make(new Router(), 'plain'), '/v1/x/9');
  await dispatch(make(new IndexedRouter() as unknown as Router, 'indexed'), '/v1/x/9');
  t.deepEqual(order, [
    'plain:use',
    'plain:first',
    'plain:second:9',
    'indexed:use',
    'indexed:first',
    'indexed:second:9',
  ]);
});

test('two routes matching one path (/me and /:id): the first answers; next() reaches the second with its params, as with @koa/router', async (t) => {
  const seen: unknown[] = [];
  const fields = (ctx: Router.RouterContext) => ({
    params: { ...ctx.params },
    routerPath: (ctx as never as { routerPath: string }).routerPath,
    matched: (ctx as never as { _matchedRoute: string })._matchedRoute,
    captures: (ctx as never as { captures: string[] }).captures,
  });
  const make = (r: Router, passOn: boolean) => {
    r.get('/v1/people/me', async (ctx, next) => {
      seen.push(['me', fields(ctx)]);
      if (passOn) await next();
    });
    r.get('/v1/people/:id', (ctx) => void seen.push(['id', fields(ctx)]));
    return r;
  };
  for (const passOn of [false, true]) {
    seen.length = 0;
    let after = 0;
    await dispatch(make(new Router(), passOn), '/v1/people/me', () => after++);
    const plain = [...seen];
    seen.length = 0;
    await dispatch(make(new IndexedRouter() as unknown as Router, passOn), '/v1/people/me', () => after++);
    t.deepEqual(seen, plain);
    t.is(seen.length, passOn ? 2 : 1);
    t.is(after, 0);
  }
});

test('a write to a path ending in / is one to an item with an empty id, when item routes take that write', async (t) => {
  // path-to-regexp's optional trailing slash would send DELETE /v1/items/ to DELETE /v1/items.
  const r = new IndexedRouter();
  const ran: string[] = [];
  r.delete('/v1/items', () => void ran.push('delete all'));
  r.delete('/v1/items/:id', () => void ran.push('delete one'));
  r.post('/v1/items', () => void ran.push('create'));
  r.get('/v1/items', () => void ran.push('list'));
  let after = 0;
  const ctx = await dispatch(r as unknown as Router, '/v1/items/', () => after++, 'DELETE');
  t.deepEqual(ran, []);
  t.is(after, 1);
  // Not matched at all (404 after the router, never a 405 naming GET and POST).
  t.is(ctx.matched, undefined);
  await dispatch(r as unknown as Router, '/V1/Items/', () => after++, 'DELETE');
  t.deepEqual(ran, []);
  await dispatch(r as unknown as Router, '/v1/items/', undefined, 'POST');
  await dispatch(r as unknown as Router, '/v1/items/', undefined, 'GET');
  await dispatch(r as unknown as Router, '/v1/items', undefined, 'DELETE');
  await dispatch(r as unknown as Router, '/v1/items/7', undefined, 'DELETE');
  t.deepEqual(ran, ['create', 'list', 'delete all', 'delete one']);
});
