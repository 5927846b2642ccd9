import test from 'ava';
import { createUser } from '../helpers/factories';
import { FakeStreamPlatform, fakeUser, startFakeStreamPlatform } from '../helpers/fakeStreamPlatform';
import { ServiceProcess, spawnService } from '../helpers/processes';
import { useStack } from '../helpers/stack';

/**
 * The api as PM2 runs it (its own process, JSON logs at info): a whole integration life, with the
 * failures that log (a refused code, a refused refresh token, an upstream error), writes no token
 * and no authorization code of the platform into a log line.
 */
let fake: FakeStreamPlatform;
let api: ServiceProcess | undefined;
const stack = useStack(test);
test.before(async () => {
  fake = await startFakeStreamPlatform();
});
test.after.always(async () => {
  await api?.kill();
  await fake?.close();
});

test('no platform token or code reaches the logs', async (t) => {
  const s = stack();
  api = await spawnService('api', { ...s.env, ...fake.env, STREAM_TIMEOUT_MS: '5000' }, 'api listening');
  const base = `http://127.0.0.1:${(await api.waitForLog('api listening')).port}`;
  const u = await createUser(s.db);
  const pu = fakeUser({ followers: 3 });
  fake.users.set(pu.id, pu);
  fake.consentingUser = pu.id;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(base + path, {
      method,
      redirect: 'manual',
      headers: { authorization: `Bearer ${u.token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return {
      status: res.status,
      location: res.headers.get('location'),
      json: (await res.json().catch(() => null)) as any,
    };
  };
  const connect = async (tamper = false) => {
    const started = await call('POST', '/v1/integrations/platform/stream/connect', {
      redirect_uri: 'https://app.example.test/done',
    });
    const c = await fake.consent(started.json.authorization_url);
    codes.push(c.code!);
    return call('GET', `/v1/integrations/callback/stream?code=${tamper ? `${c.code}x` : c.code}&state=${c.state}`);
  };
  const codes: string[] = [];

  t.is(new URL((await connect(true)).location!).searchParams.get('error'), 'invalid_grant');
  const ok = await connect();
  const id = new URL(ok.location!).searchParams.get('integration_id')!;
  fake.expireAccessTokens();
  const stats = await call('POST', `/v1/integrations/${id}/stats`);
  t.is(stats.status, 200, JSON.stringify(stats.json));
  t.is((await call('POST', `/v1/integrations/${id}/refresh`)).status, 200);
  fake.failWith.set('/helix/streams', 500);
  t.is((await call('POST', `/v1/integrations/${id}/stats`)).status, 502);
  fake.failWith.clear();
  fake.refreshTokens.clear();
  t.is((await call('POST', `/v1/integrations/${id}/refresh`)).status, 502);
  t.is((await call('DELETE', `/v1/integrations/${id}`)).status, 200);

  await api.waitForLog('integration connect failed');
  const logs = api.logs.map((l) => JSON.stringify(l)).join('\n');
  t.true(logs.includes('stream platform refused the refresh token'), 'the refused refresh was logged');
  t.true(fake.issued.length >= 6);
  for (const secret of [...fake.issued, ...codes, fake.clientSecret])
    t.false(logs.includes(secret), 'a platform secret in the logs');
});
