import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type Koa from 'koa';
import { createApp } from '../../api/app';
import { buildGraphqlSchema } from '../../api/graphql';
import { isRateLimitExempt } from '../../api/middleware/rateLimit';
import { createUser } from '../helpers/factories';
import { responseChecker } from '../helpers/openapiCheck';
import { useStack } from '../helpers/stack';
import { withResponsesInline } from '../../api/openapiSpec';

const stack = useStack(test);

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, Record<string, any>>>;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
};
/** The document with the shared answers (components/responses) inlined in each operation. */
const getDoc = async () => withResponsesInline((await stack().request<Doc>('GET', '/v1/openapi.json')).body);

/** Every method+path the application's router answers, read from its layers (as bench/routes does). */
async function routerRoutes(): Promise<string[]> {
  const app = createApp(stack().api.services, await buildGraphqlSchema()) as unknown as Koa;
  const dispatch = app.middleware.find((m) => (m as unknown as { router?: unknown }).router) as unknown as {
    router: { stack: Array<{ path: string | RegExp; methods: string[] }> };
  };
  const out = new Set<string>();
  for (const layer of dispatch.router.stack)
    for (const m of layer.methods) if (m !== 'HEAD') out.add(`${m.toLowerCase()} ${String(layer.path)}`);
  return [...out];
}

test('the document is valid OpenAPI 3.1 (@seriousme/openapi-schema-validator)', async (t) => {
  const doc = await getDoc();
  const { Validator } =
    (await import('@seriousme/openapi-schema-validator')) as typeof import('@seriousme/openapi-schema-validator');
  const validator = new Validator();
  const result = await validator.validate(doc as never);
  t.deepEqual(result.errors, undefined);
  t.true(result.valid);
  t.is(validator.version, '3.1');
});

test('every route the router answers is in the document', async (t) => {
  const doc = await getDoc();
  const documented = new Set<string>();
  for (const [path, ops] of Object.entries(doc.paths))
    for (const m of Object.keys(ops)) documented.add(`${m} ${path.replace(/\{([A-Za-z0-9_]+)\}/g, ':$1')}`);
  const routes = await routerRoutes();
  t.true(routes.length > 100, `router lists ${routes.length} routes`);
  const missing = routes.filter((r) => !documented.has(r));
  t.deepEqual(missing, [], 'routes missing from /v1/openapi.json');
  // Routes mounted on the router directly are documented through documentRoute.
  for (const r of ['post /v1/gql', 'get /v1/schema', 'get /v1/openapi.json', 'get /v1/swagger-ui/:file'])
    t.true(documented.has(r), r);
});

test('every 2xx JSON response documents a schema; errors use the Error component', async (t) => {
  const doc = await getDoc();
  const problems: string[] = [];
  for (const [path, ops] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(ops)) {
      for (const [status, r] of Object.entries(op.responses as Record<string, any>)) {
        if (Number(status) >= 200 && Number(status) < 300 && status !== '204' && !r.content)
          problems.push(`${method} ${path} ${status}: no content schema`);
        if (Number(status) >= 400 && !r.content) problems.push(`${method} ${path} ${status}: no error schema`);
      }
      // Rate limiting, authentication and dependencies are in front of every route (api/app.ts).
      const exempt = isRateLimitExempt(path.replace(/\{([A-Za-z0-9_]+)\}/g, ':$1'));
      if (!op.responses['429'] !== exempt) problems.push(`${method} ${path}: 429 ${exempt ? 'but exempt' : 'missing'}`);
      for (const status of ['401', '403', '500', '503'])
        if (!op.responses[status]) problems.push(`${method} ${path}: no ${status}`);
      if (path.includes('{') && !op.responses['404']) problems.push(`${method} ${path}: path params but no 404`);
    }
  t.deepEqual(problems, []);
});

test('reusable components, bearer scheme, x-permission and examples', async (t) => {
  const doc = await getDoc();
  for (const name of ['Error', 'SelfLinks', 'PageLinks', 'Pagination', 'Message', 'Success'])
    t.truthy(doc.components.schemas[name], name);
  t.deepEqual(doc.components.securitySchemes.bearerAuth, {
    type: 'http',
    scheme: 'bearer',
    description: 'Session token, OAuth access token, API key or system key',
  });
  const list = doc.paths['/v1/trips'].get;
  t.is(list['x-permission'], 'trips:read');
  t.deepEqual(list.security, [{ bearerAuth: [] }]);
  const page = list.responses['200'].content['application/json'].schema;
  t.deepEqual(page.properties.pagination, { $ref: '#/components/schemas/Pagination' });
  t.deepEqual(page.properties._links, { $ref: '#/components/schemas/PageLinks' });
  t.deepEqual(list.responses['403'].content['application/json'].schema, { $ref: '#/components/schemas/Error' });
  t.truthy(list.responses['429'].headers['Retry-After']);
  t.deepEqual(doc.paths['/v1/health'].get.security, []);
  // Public, yet a bad credential sent to it is refused.
  t.regex(doc.paths['/v1/health'].get.responses['401'].description, /public route/);
  const withExamples = Object.values(doc.paths)
    .flatMap((ops) => Object.values(ops))
    .filter((op) => JSON.stringify(op).includes('"example'));
  t.true(withExamples.length >= 5, `${withExamples.length} operations carry examples`);
  t.truthy(doc.paths['/v1/auth/login'].post.requestBody.content['application/json'].example);
});

test('the response check catches a body that departs from its schema', async (t) => {
  const s = stack();
  const doc = await getDoc();
  const checker = responseChecker(doc as never);
  const user = await createUser(s.db, { username: 'shape' });
  const good = await s.request('GET', `/v1/users/${user.id}`, { token: user.token });
  t.is(good.status, 200);
  t.is(checker.check('GET', `/v1/users/${user.id}`, 200, good.body), null);
  t.regex(checker.check('GET', `/v1/users/${user.id}`, 200, { data: {} }) ?? '', /required property/);
  t.regex(checker.check('GET', '/v1/users/me', 200, { ...good.body, _links: 1 }) ?? '', /_links/);
  t.regex(checker.check('GET', '/v1/nope', 200, {}) ?? '', /not in the OpenAPI document/);
  t.regex(checker.check('GET', '/v1/health', 201, {}) ?? '', /does not document status 201/);
});

test('self links: every answer a test receives is checked to name a GET route, parameters included', async (t) => {
  // test/helpers/stack.ts asks readable() of each 2xx answer's `_links.self` and Location header.
  const checker = responseChecker((await getDoc()) as never);
  const id = '0b6f5d4c-3a2b-4c1d-8e9f-a0b1c2d3e4f5';
  for (const link of [
    '/v1/gps',
    '/v1/gps?page=2&limit=5',
    `/v1/gps/${id}`,
    `/v1/locations/${id}/contacts/${id}`,
    `/v1/users/${id}/accounts/${id}`,
    `/v1/users/me/accounts/${id}`,
  ])
    t.true(checker.readable(link), link);
  // /v1/gps/batch fits /v1/gps/{id} as text, not as the UUID that route takes.
  for (const link of ['/v1/gps/batch', `/v1/users/${id}/accounts/${id}/primary`, `/v1/users/${id}/ban/x`, '/v1/nope'])
    t.false(checker.readable(link), link);
});

test('docs/api.md names exactly the paths without a 429: the rate limiter exempts them, and counts the rest', async (t) => {
  const doc = await getDoc();
  const md = readFileSync(path.resolve(__dirname, '../../../docs/api.md'), 'utf8').replace(/\s+/g, ' ');
  const sentence = /wherever the rate limiter counts, which is everywhere but (.*?) \(spec §8/.exec(md);
  if (!sentence) return t.fail('docs/api.md: the 429 item names no exempt paths');
  // `/v1/swagger-ui/…` stands for every path under it.
  const named = [...sentence[1].matchAll(/`(\/[^`]*)`/g)].map((m) => m[1]);
  const covers = (p: string) => named.some((n) => (n.endsWith('/…') ? p.startsWith(n.slice(0, -1)) : p === n));
  for (const n of named) t.true(isRateLimitExempt(n.replace(/…$/, 'index.html')), `${n} is named exempt but counted`);
  t.true(named.includes('/v1/ws') && isRateLimitExempt('/v1/ws'));
  const problems: string[] = [];
  for (const [p, ops] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(ops)) {
      const limited = Boolean(op.responses['429']);
      if (limited === covers(p))
        problems.push(`${method} ${p}: ${limited ? 'counted, yet named' : 'exempt, not named'}`);
    }
  t.deepEqual(problems, []);
  t.truthy(doc.paths['/v1/asyncapi.json'].get.responses['429'], 'the AsyncAPI document is counted');
});

test('limits checked beyond the JSON Schema are described on their fields', async (t) => {
  const doc = await getDoc();
  // A refinement (a date no further ahead than the clock allows, a configured locale) is not
  // expressible as JSON Schema: the field's description must say it, or a client meets a 400 the
  // document did not announce.
  const text = JSON.stringify(doc);
  const described = (field: string) =>
    [...text.matchAll(new RegExp(`"${field}":\\{[^{}]*"description":"([^"]*)"`, 'g'))].map((m) => m[1]);
  t.true(
    described('timestamp').some((d) => /600 s ahead of the server's clock/.test(d)),
    'GPS point timestamp: the future limit',
  );
  t.true(
    described('default_language').some((d) => /SUPPORTED_LOCALES/.test(d)),
    'chat settings: the configured locales',
  );
});
