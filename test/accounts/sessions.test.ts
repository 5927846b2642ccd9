import test from 'ava';
import { createSession } from '../../shared/commands/sessions';
import { createKey, createUser } from '../helpers/factories';
import { listenPushes } from '../helpers/pushes';
import { useStack } from '../helpers/stack';

const stack = useStack(test);
const IPHONE =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1';
const FIREFOX = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0';
const IPAD =
  'Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1';

test('list: parsed devices, provider names, the current session flagged', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const phone = await createSession(stack().db, user.id, new Date(Date.now() + 3600_000), {
    userAgent: IPHONE,
    ipAddress: '198.51.100.4',
    platformSlug: 'github',
  });
  await createSession(stack().db, user.id, new Date(Date.now() + 3600_000), {
    userAgent: FIREFOX,
    platformSlug: 'chat',
  });
  await createSession(stack().db, user.id, new Date(Date.now() + 3600_000), { userAgent: IPAD, platformSlug: 'email' });
  await createSession(stack().db, user.id, new Date(Date.now() - 1000), { userAgent: FIREFOX }); // expired: not listed
  const r = await s.request('GET', '/v1/users/me/sessions', { token: user.token });
  t.is(r.status, 200, r.text);
  t.is(r.body.current_session_id, user.sessionId);
  t.is(r.body._links.self, '/v1/users/me/sessions');
  t.is(r.body.sessions.length, 4);
  const byId = new Map(r.body.sessions.map((x: any) => [x.id, x]));
  const p: any = byId.get(phone.session.id);
  t.deepEqual(Object.keys(p).sort(), [
    'browser_name',
    'created_at',
    'device_type',
    'expires_at',
    'id',
    'ip_address',
    'is_current',
    'last_activity_at',
    'os_name',
    'provider',
    'provider_name',
    'user_agent',
  ]);
  t.is(p.device_type, 'mobile');
  t.regex(p.browser_name, /Safari/);
  t.regex(p.os_name, /iOS/);
  t.is(p.provider, 'github');
  t.is(p.provider_name, 'GitHub');
  t.is(p.ip_address, '198.51.100.4');
  t.false(p.is_current);
  const ff: any = r.body.sessions.find((x: any) => x.provider === 'chat');
  t.is(ff.device_type, 'desktop');
  t.regex(ff.browser_name, /Firefox/);
  t.regex(ff.os_name, /Windows/);
  t.is(r.body.sessions.find((x: any) => x.provider === 'email' && x.id !== user.sessionId).device_type, 'tablet');
  t.true((byId.get(user.sessionId) as any).is_current);
});

test('a session of an unknown client still has every field as a string (spec §2)', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const bare = await createSession(s.db, user.id, new Date(Date.now() + 3600_000), {});
  const curl = await createSession(s.db, user.id, new Date(Date.now() + 3600_000), { userAgent: 'curl/8.5.0' });
  const r = await s.request('GET', '/v1/users/me/sessions', { token: user.token });
  t.is(r.status, 200, r.text);
  for (const id of [bare.session.id, curl.session.id]) {
    const x = r.body.sessions.find((y: any) => y.id === id);
    for (const f of ['ip_address', 'user_agent', 'browser_name', 'os_name', 'provider', 'provider_name'])
      t.is(typeof x[f], 'string', `${f} of ${id}: ${JSON.stringify(x[f])}`);
    t.is(x.browser_name, 'Unknown');
    t.is(x.os_name, 'Unknown');
  }
  t.is(r.body.sessions.find((y: any) => y.id === bare.session.id).user_agent, '');
  t.is(r.body.sessions.find((y: any) => y.id === curl.session.id).user_agent, 'curl/8.5.0');
});

test('needs a session token: API keys 403, anonymous 401', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const key = await createKey({ userId: user.id, scopes: ['users:read'] });
  t.is((await s.request('GET', '/v1/users/me/sessions', { token: key.key })).status, 403);
  t.is((await s.request('GET', '/v1/users/me/sessions')).status, 401);
});

test("revoke one: 400 {success:false} for the current one, 404 for others' sessions, push + 401 after", async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const stranger = await createUser(s.db);
  const second = await createSession(stack().db, user.id, new Date(Date.now() + 3600_000), { userAgent: FIREFOX });
  const cur = await s.request('DELETE', `/v1/users/me/sessions/${user.sessionId}`, { token: user.token });
  t.is(cur.status, 400);
  t.false(cur.body.success);
  t.truthy(cur.body.message);
  // The same session written in upper case is still the current one.
  const upper = await s.request('DELETE', `/v1/users/me/sessions/${user.sessionId.toUpperCase()}`, {
    token: user.token,
  });
  t.is(upper.status, 400, upper.text);
  t.is((await s.request('GET', '/v1/users/me', { token: user.token })).status, 200);
  t.is((await s.request('DELETE', `/v1/users/me/sessions/${stranger.sessionId}`, { token: user.token })).status, 404);
  // Nothing was revoked, so nothing is recorded (the delete and its event are one statement).
  t.is(await s.db('audit_events').where({ user_id: user.id, event_type: 'session_revoked' }).first(), undefined);
  t.is((await s.request('GET', '/v1', { token: stranger.token })).status, 200);
  t.is((await s.request('GET', '/v1', { token: second.token })).status, 200); // cached now

  const pushes = await listenPushes(s.redis, s.config, `user:${user.id}`);
  try {
    const r = await s.request('DELETE', `/v1/users/me/sessions/${second.session.id}`, { token: user.token });
    t.is(r.status, 200);
    t.deepEqual(r.body, { success: true, message: 'session revoked' });
    const push = await pushes.waitFor((m) => m.type === 'sessionRevoked');
    t.deepEqual({ userId: push.userId, sessionId: push.sessionId }, { userId: user.id, sessionId: second.session.id });
    t.truthy(push.reason);
    t.truthy(push.timestamp);
  } finally {
    pushes.close();
  }
  await new Promise((r) => setTimeout(r, 50));
  t.is((await s.request('GET', '/v1', { token: second.token })).status, 401);
  t.is((await s.request('GET', '/v1/users/me', { token: user.token })).status, 200);
  t.truthy(await s.db('audit_events').where({ user_id: user.id, event_type: 'session_revoked' }).first());
});

test('revoke all others: count, one push per session, the current one survives', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const others = await Promise.all(
    [1, 2, 3].map(() => createSession(stack().db, user.id, new Date(Date.now() + 3600_000))),
  );
  const pushes = await listenPushes(s.redis, s.config, `user:${user.id}`);
  try {
    const r = await s.request('DELETE', '/v1/users/me/sessions', { token: user.token });
    t.is(r.status, 200);
    t.true(r.body.success);
    t.is(r.body.revoked_count, 3);
    t.truthy(r.body.message);
    for (const o of others) await pushes.waitFor((m) => m.type === 'sessionRevoked' && m.sessionId === o.session.id);
  } finally {
    pushes.close();
  }
  await new Promise((r) => setTimeout(r, 50));
  for (const o of others) t.is((await s.request('GET', '/v1', { token: o.token })).status, 401);
  const list = await s.request('GET', '/v1/users/me/sessions', { token: user.token });
  t.deepEqual(
    list.body.sessions.map((x: any) => x.id),
    [user.sessionId],
  );
  t.is((await s.request('DELETE', '/v1/users/me/sessions', { token: user.token })).body.revoked_count, 0);
});

test('last_activity_at is stamped in batches, not per request', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const before = (await s.db('sessions').where('id', user.sessionId).first()).last_activity_at;
  await new Promise((r) => setTimeout(r, 20));
  await s.request('GET', '/v1/users/me', { token: user.token });
  t.deepEqual((await s.db('sessions').where('id', user.sessionId).first()).last_activity_at, before);
  await s.api.services.credentials.flushUsage();
  const after = (await s.db('sessions').where('id', user.sessionId).first()).last_activity_at;
  t.true(after.getTime() > before.getTime());
});

test('a revoke with an empty session id (a trailing slash) is 404 and ends no session', async (t) => {
  // DELETE /v1/users/me/sessions/ is DELETE /v1/users/me/sessions/{id} with the id left out (a
  // client that builds the path from an empty value), not "revoke all others".
  const s = stack();
  const user = await createUser(s.db);
  const other = await createSession(stack().db, user.id, new Date(Date.now() + 3600_000));
  for (const path of ['/v1/users/me/sessions/', '/v1/USERS/me/sessions/']) {
    const r = await s.request('DELETE', path, { token: user.token });
    t.is(r.status, 404, path);
    t.is(r.body.error, 'NotFound');
  }
  t.is((await s.request('GET', '/v1', { token: other.token })).status, 200);
  const list = await s.request('GET', '/v1/users/me/sessions', { token: user.token });
  t.is(list.status, 200);
  t.is(list.body.sessions.length, 2);
});

test('two sessions ending each other at once: one wins, the other finds itself ended (401), one session stays', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const expires = new Date(Date.now() + 3_600_000);
  for (const crosswise of [false, true]) {
    await s.db('sessions').where('user_id', u.id).delete();
    const [a, b] = [await createSession(s.db, u.id, expires), await createSession(s.db, u.id, expires)];
    const end = (mine: typeof a, theirs: typeof a) =>
      crosswise
        ? s.request('DELETE', `/v1/users/me/sessions/${theirs.session.id}`, { token: mine.token })
        : s.request('DELETE', '/v1/users/me/sessions', { token: mine.token });
    const answers = await Promise.all([end(a, b), end(b, a)]);
    t.deepEqual(
      answers.map((r) => r.status).sort(),
      [200, 401],
      `${crosswise ? 'crosswise' : 'others'}: ${answers.map((r) => r.text).join(' | ')}`,
    );
    const left = await s.db('sessions').where('user_id', u.id).pluck('id');
    const winner = answers[0].status === 200 ? a : b;
    t.deepEqual(left, [winner.session.id]);
  }
});
