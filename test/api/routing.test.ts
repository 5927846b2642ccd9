import test from 'ava';
import { paginate, paginationQuery } from '../../api/pagination';
import { routeModules } from '../../api/routes';
import { pageSchema, resourceSchema } from '../../api/responses';
import { defineRoute } from '../../api/routing';
import { Permission } from '../../shared/models/Permission';
import { z, zUuid } from '../../shared/zod';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

// A real route through the full middleware stack: permission check, validation, pagination.
routeModules.push((router) => {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/test-permissions',
      summary: 'test',
      tags: ['test'],
      auth: { permission: 'permissions:read' },
      query: paginationQuery(10),
      responses: {
        200: { description: 'test page', schema: pageSchema(z.object({ id: z.string(), name: z.string() })) },
      },
    },
    async (ctx, { query }) => {
      ctx.body = await paginate(ctx, Permission.query().orderBy(['resource', 'action']), query, (p) => ({
        id: p.id,
        name: `${p.resource}:${p.action}`,
      }));
    },
  );
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/test-users/:id',
      summary: 'test',
      tags: ['test'],
      auth: { permission: 'users:read', self: 'id' },
      params: z.object({ id: zUuid() }),
      responses: { 200: { description: 'test user', schema: resourceSchema(z.object({ id: z.string() })) } },
    },
    (ctx, { params }) => {
      ctx.body = { data: { id: params.id }, _links: { self: ctx.path } };
    },
  );
});

const stack = useStack(test);

test('401 anonymous, 403 without the permission, 200 with it', async (t) => {
  const s = stack();
  const plain = await createUser(s.db, { roles: ['role_user'] });
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  t.is((await s.request('GET', '/v1/test-permissions')).status, 401);
  const denied = await s.request('GET', '/v1/test-permissions', { token: plain.token });
  t.is(denied.status, 403);
  t.is(denied.body.error, 'Forbidden');
  t.regex(denied.body.message, /permissions:read/);
  t.is((await s.request('GET', '/v1/test-permissions', { token: dev.token })).status, 200);
});

test("'or self': a user reads their own record without the permission, not someone else's", async (t) => {
  const s = stack();
  const a = await createUser(s.db);
  const b = await createUser(s.db);
  t.is((await s.request('GET', `/v1/test-users/${a.id}`, { token: a.token })).status, 200);
  t.is((await s.request('GET', `/v1/test-users/${b.id}`, { token: a.token })).status, 403);
  const bad = await s.request('GET', '/v1/test-users/nope', { token: a.token });
  t.is(bad.status, 400);
  t.regex(bad.body.message, /^id: must be a UUID/);
  // An API key of the user is not "self": it acts only through its scopes.
  const key = await createKey({ userId: a.id, scopes: ['gps:read'] });
  t.is((await s.request('GET', `/v1/test-users/${a.id}`, { token: key.key })).status, 403);
});

test('pagination: first, middle and last page with links', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const total = (await s.db('permissions').count('* as c').first())!.c as number;
  const limit = 10;
  const pages = Math.ceil(total / limit);
  t.true(pages >= 3);

  const first = await s.request('GET', `/v1/test-permissions?limit=${limit}`, { token: admin.token });
  t.is(first.status, 200);
  t.deepEqual(first.body.pagination, { page: 1, limit, total, total_pages: pages });
  t.is(first.body.data.length, limit);
  t.is(first.body._links.self, `/v1/test-permissions?limit=${limit}&page=1`);
  t.is(first.body._links.first, `/v1/test-permissions?limit=${limit}&page=1`);
  t.is(first.body._links.next, `/v1/test-permissions?limit=${limit}&page=2`);
  t.is(first.body._links.last, `/v1/test-permissions?limit=${limit}&page=${pages}`);
  t.false('prev' in first.body._links);

  const middle = await s.request('GET', `/v1/test-permissions?page=2&limit=${limit}`, { token: admin.token });
  t.is(middle.body._links.prev, `/v1/test-permissions?page=1&limit=${limit}`);
  t.is(middle.body._links.next, `/v1/test-permissions?page=3&limit=${limit}`);
  t.notDeepEqual(middle.body.data[0], first.body.data[0]);

  const last = await s.request('GET', `/v1/test-permissions?page=${pages}&limit=${limit}`, { token: admin.token });
  t.is(last.body.data.length, total - (pages - 1) * limit);
  t.false('next' in last.body._links);
  t.truthy(last.body._links.prev);

  const dflt = await s.request('GET', '/v1/test-permissions', { token: admin.token });
  t.is(dflt.body.pagination.limit, 10);
});

test('pagination: limit over 100, zero or non-integer page are 400 naming the field', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const over = await s.request('GET', '/v1/test-permissions?limit=101', { token: admin.token });
  t.is(over.status, 400);
  t.regex(over.body.message, /^limit: /);
  t.is((await s.request('GET', '/v1/test-permissions?page=0', { token: admin.token })).status, 400);
  const nan = await s.request('GET', '/v1/test-permissions?page=abc', { token: admin.token });
  t.is(nan.status, 400);
  t.regex(nan.body.message, /^page: /);
  const max = await s.request('GET', '/v1/test-permissions?limit=100', { token: admin.token });
  t.is(max.status, 200);
  // Decimal digits only: Number() would also read hex, binary, exponents, blanks and '' (as 0).
  for (const query of ['limit=0x10', 'limit=0b11', 'limit=1e1', 'page=1e2', 'limit=', 'limit=%2010', 'page=+2']) {
    const r = await s.request('GET', `/v1/test-permissions?${query}`, { token: admin.token });
    t.is(r.status, 400, query);
    t.regex(r.body.message, /^(limit|page): must be an integer/, query);
  }
  const leadingZero = await s.request('GET', '/v1/test-permissions?limit=010', { token: admin.token });
  t.is(leadingZero.status, 200);
  t.is(leadingZero.body.pagination.limit, 10);
});
