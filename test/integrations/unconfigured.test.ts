import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

/** Without STREAM_* configuration the platform is listed as disabled and connecting answers 503. */
const stack = useStack(test, { env: { STREAM_AUTH_URL: 'http://127.0.0.1:9/oauth2' } });

test('the unconfigured stream platform is listed with enabled false', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  t.is(s.config.stream, null, 'one STREAM_* value alone does not configure the platform');
  const r = await s.request('GET', '/v1/integrations/platforms', { token: u.token });
  t.is(r.status, 200);
  t.like(r.body.platforms[0], { slug: 'stream', enabled: false });
  t.true(r.body.platforms[0].features.length > 0);
  const scopes = await s.request('GET', '/v1/integrations/platform/stream/scopes', { token: u.token });
  t.is(scopes.status, 200);
  t.true(scopes.body.scopes.some((x: { required: boolean }) => x.required));
  t.deepEqual((await s.request('GET', '/v1/integrations', { token: u.token })).body, []);
});

test('connect answers 503 naming what to configure, and stores no state', async (t) => {
  const s = stack();
  const u = await createUser(s.db);
  const r = await s.request('POST', '/v1/integrations/platform/stream/connect', {
    token: u.token,
    body: { redirect_uri: 'https://app.example.test/done' },
  });
  t.is(r.status, 503);
  t.is(r.body.error, 'ServiceUnavailable');
  t.regex(r.body.message, /STREAM_AUTH_URL/);
  t.deepEqual(await s.redis.keys(`${s.config.redisPrefix}integration:*`), []);
});

test('the scheduled refresh does nothing while the platform is not configured', async (t) => {
  const { scheduledTasks } = await import('../../workers/processors/scheduled');
  t.deepEqual(await scheduledTasks.refreshIntegrationTokens(stack().api.services), { due: 0, refreshed: 0, failed: 0 });
});
