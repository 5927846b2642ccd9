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
    '/v1', '/v1/', '/V1', '/health', '/HEALTH/', '/v1/health', '/v1/users', '/v1/users/', '/v1/users/me', '/v1/Users/ME',
    '/v1/users/123e4567-e89b-12d3-a456-426614174000', '/v1/users/x/roles', '/v1/trips/abc/history', '/v1/gps/batch',
    '/v1/gps/current/devices', '/v1/swagger-ui/', '/v1/swagger-ui/swagger-ui.css', '/v1/nope', '/nope', '/', '',
    '/v1/foo/weird', '/v1/internal/audit', '/v1/sessions/sess_abc', '/v1/oauth/token', '/v1/gql', '/v1/schema',
  ];
  for (const path of paths) {
    for (const method of ['GET', 'POST', 'PATCH', 'DELETE', 'PUT', 'HEAD']) {
      t.deepEqual(summary(indexed.match(path, method)), summary(plain.match(path, method)), `${method} ${path}`);
    }
  }
});

test('routes added after the first match are found (the index rebuilds)', (t) => {
  const r = new IndexedRouter();
  r.get('/v1/a', () => undefined);
  t.true(r.match('/v1/a', 'GET').route);
  r.get('/v1/b', () => undefined);
  t.true(r.match('/v1/b', 'GET').route);
});
