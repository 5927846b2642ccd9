import test from 'ava';
import { createKey, createUser } from '../helpers/factories';
import { startStack, useStack } from '../helpers/stack';
import { QueueName } from '../../shared/queues';

const stack = useStack(test);

/**
 * Bull Board's own pages and JSON API are not this service's REST API (they are not in the OpenAPI
 * document that stack.request checks answers against): plain fetch.
 */
async function board(
  path: string,
  opts: { method?: string; token?: string; headers?: Record<string, string>; url?: string; signal?: AbortSignal } = {},
) {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const res = await fetch(`${opts.url ?? stack().url}${path}`, {
    method: opts.method ?? 'GET',
    headers,
    signal: opts.signal,
  });
  const text = await res.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body };
}

test('the queue dashboard: 401 without a credential, 403 without admin:read, 200 with it (header or cookie)', async (t) => {
  const s = stack();
  const [admin, user] = await Promise.all([
    createUser(s.db, { roles: ['role_admin'] }),
    createUser(s.db, { roles: ['role_user'] }),
  ]);
  t.is((await board('/v1/admin/queues')).status, 401);
  t.is((await board('/v1/admin/queues/api/queues')).status, 401);
  const refused = await board('/v1/admin/queues/api/queues', { token: user.token });
  t.is(refused.status, 403);
  t.truthy(refused.body.error);
  t.is((await board('/v1/admin/queues', { token: user.token })).status, 403);
  t.is((await s.request('POST', '/v1/admin/queues/session', { token: user.token })).status, 403);

  const page = await board('/v1/admin/queues', { token: admin.token });
  t.is(page.status, 200);
  t.regex(page.headers.get('content-type') ?? '', /html/);
  // No other site may frame the board (its buttons act with the dashboard's cookie).
  t.is(page.headers.get('x-frame-options'), 'DENY');
  t.is(page.headers.get('content-security-policy'), "frame-ancestors 'none'");
  const api = await board('/v1/admin/queues/api/queues', { token: admin.token });
  t.is(api.status, 200);
  // Every queue of the registry is on the board.
  t.deepEqual(api.body.queues.map((q: { name: string }) => q.name).sort(), [...Object.values(QueueName)].sort());

  // A browser: the session endpoint sets an HttpOnly cookie scoped to the dashboard, which then suffices.
  const session = await s.request('POST', '/v1/admin/queues/session', { token: admin.token });
  t.is(session.status, 204);
  const setCookie = session.headers.get('set-cookie') ?? '';
  t.regex(setCookie, /queue_dashboard_session=/);
  t.regex(setCookie, /httponly/i);
  t.regex(setCookie, /samesite=strict/i);
  t.regex(setCookie, /path=\/v1\/admin\/queues/i);
  // It lasts 8 hours (docs/workers.md): Max-Age, or an Expires 8 hours ahead.
  const maxAge = /max-age=(\d+)/i.exec(setCookie)?.[1];
  const expires = /expires=([^;]+)/i.exec(setCookie)?.[1];
  t.true(maxAge !== undefined || expires !== undefined, setCookie);
  if (maxAge !== undefined) t.is(Number(maxAge), 8 * 3600);
  if (expires !== undefined) {
    const lifetime = Date.parse(expires) - Date.now();
    t.true(Math.abs(lifetime - 8 * 3600_000) < 60_000, `expires in ${lifetime} ms`);
  }
  const cookie = setCookie.split(';')[0];
  const viaCookie = await board('/v1/admin/queues/api/queues', { headers: { cookie } });
  t.is(viaCookie.status, 200);
  const userCookie = `queue_dashboard_session=${user.token}`;
  t.is((await board('/v1/admin/queues/api/queues', { headers: { cookie: userCookie } })).status, 403);
  t.is((await board('/v1/admin/queues', { headers: { cookie: 'queue_dashboard_session=nope' } })).status, 401);
});

test('a method the dashboard does not serve answers 405 with Allow, not a 500 from Bull Board', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  for (const [method, path] of [
    ['PROPFIND', '/v1/admin/queues/api/queues'],
    ['DELETE', '/v1/admin/queues/api/queues'],
    ['PUT', '/v1/admin/queues/api/queues'],
    ['POST', '/v1/admin/queues'],
  ]) {
    const r = await board(path, { method, token: admin.token });
    t.is(r.status, 405, `${method} ${path}`);
    t.is(r.body.error, 'MethodNotAllowed', `${method} ${path}`);
    t.regex(r.body.message, new RegExp(`method ${method} not allowed`));
    t.regex(r.headers.get('allow') ?? '', /GET/, `${method} ${path}`);
  }
  // What the board serves still works, and an unknown dashboard path is a 404.
  t.is((await board('/v1/admin/queues/api/queues', { token: admin.token })).status, 200);
  t.is((await board('/v1/admin/queues/api/nothing-here', { token: admin.token })).status, 404);
});

test('admin:read looks; only a super admin acts (pause, resume, clean)', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  // The admin's own key, narrowed to admin:read: it may look, not act.
  const reader = await createKey({ userId: admin.id, scopes: ['admin:read'] });
  t.is((await board('/v1/admin/queues/api/queues', { token: reader.key })).status, 200);
  for (const [method, path] of [
    ['PUT', '/v1/admin/queues/api/queues/email/pause'],
    ['PUT', '/v1/admin/queues/api/queues/email/clean/failed'],
    ['PUT', '/v1/admin/queues/api/queues/pause'],
  ]) {
    const r = await board(path, { method, token: reader.key });
    t.is(r.status, 403, `${method} ${path}`);
    t.is(r.body.error, 'Forbidden');
  }
  t.false(await s.api.services.queues.queue(QueueName.email).isPaused());
  // The super admin acts.
  const paused = await board('/v1/admin/queues/api/queues/email/pause', { method: 'PUT', token: admin.token });
  t.true(paused.status < 300, String(paused.status));
  t.true(await s.api.services.queues.queue(QueueName.email).isPaused());
  const resumed = await board('/v1/admin/queues/api/queues/email/resume', { method: 'PUT', token: admin.token });
  t.true(resumed.status < 300, String(resumed.status));
  t.false(await s.api.services.queues.queue(QueueName.email).isPaused());
});

test('with Redis unreachable, the dashboard API answers 503 instead of hanging; the page still loads', async (t) => {
  // Port 1: nothing listens, as with REDIS_URL at a closed port.
  const dead = await startStack({ env: { REDIS_URL: 'redis://127.0.0.1:1' } });
  try {
    const admin = await createUser(dead.db, { roles: ['role_admin'] });
    const calls: Array<[string, string]> = [
      ['GET', '/v1/admin/queues/api/queues?activeQueue=email&page=1'],
      ['GET', '/v1/admin/queues/api/redis/stats'],
      ['PUT', '/v1/admin/queues/api/queues/geofence/retry/failed'],
    ];
    for (const [method, path] of calls) {
      // The signal only turns a hang into a failure, far beyond the answer's own bound.
      const r = await board(path, { method, token: admin.token, url: dead.url, signal: AbortSignal.timeout(8000) });
      t.is(r.status, 503, `${method} ${path}`);
      t.is(r.body.error, 'ServiceUnavailable');
      t.regex(r.body.message, /Redis is unreachable/);
      t.is(r.headers.get('retry-after'), '5');
    }
    // Refusals come first: Redis is never asked for a caller who may not see the queues.
    t.is((await board('/v1/admin/queues/api/queues', { url: dead.url })).status, 401);
    const page = await board('/v1/admin/queues', { token: admin.token, url: dead.url });
    t.is(page.status, 200);
  } finally {
    await dead.close();
  }
});
