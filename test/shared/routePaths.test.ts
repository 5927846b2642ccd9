import test from 'ava';
import { isRoutePath, isUnderRoutePath } from '../../shared/routePaths';

test('a route path matches in any case and with one trailing slash, as the router serves it', (t) => {
  for (const p of ['/v1/gql', '/V1/GQL', '/v1/Gql/', '/v1/gql/']) t.true(isRoutePath(p, '/v1/gql'), p);
  for (const p of ['/v1/gql//', '/v1/gqlx', '/v1/gq', '/v1/gql/x', '/v1/gq/', ''])
    t.false(isRoutePath(p, '/v1/gql'), p);
});

test('a path under a prefix matches whole segments only, in any case', (t) => {
  for (const p of ['/v1/sessions', '/v1/sessions/', '/V1/SESSIONS/abc', '/v1/sessions/a/b'])
    t.true(isUnderRoutePath(p, '/v1/sessions'), p);
  for (const p of ['/v1/sessionsx', '/v1/sessionsx/a', '/v1/session']) t.false(isUnderRoutePath(p, '/v1/sessions'), p);
});
