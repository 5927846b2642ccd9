import test from 'ava';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody } from '../helpers/tracking';

// Default limit (30); a long window so the test never straddles a window boundary.
const stack = useStack(test, { env: { RATE_LIMIT_GPS_POST_WINDOW_SECONDS: '3600' } });

test('POST /v1/gps allows 30 requests per window by default, then 429 with rate-limit headers; a batch counts as one of them', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_developer'] });
  const key = await createKey({ userId: user.id, scopes: ['gps:write', 'gps:read'] });
  for (let i = 0; i < 30; i++) {
    const r = await s.request('POST', '/v1/gps', { token: key.key, body: gpsBody() });
    t.is(r.status, 201, r.text);
  }
  const limited = await s.request('POST', '/v1/gps', { token: key.key, body: gpsBody() });
  t.is(limited.status, 429);
  t.is(limited.headers.get('x-ratelimit-limit'), '30');
  t.is(limited.headers.get('x-ratelimit-remaining'), '0');
  t.truthy(limited.headers.get('retry-after'));
  const batch = await s.request('POST', '/v1/gps/batch', { token: key.key, body: { points: [gpsBody(), gpsBody()] } });
  t.is(batch.status, 429, 'the batch route shares the counter');
  t.is(batch.headers.get('x-ratelimit-limit'), '30');

  // Another key: batches and single points draw on one allowance of 30 requests.
  const other = await createKey({ userId: user.id, scopes: ['gps:write'] });
  for (let i = 0; i < 15; i++) {
    const b = await s.request('POST', '/v1/gps/batch', { token: other.key, body: { points: [gpsBody(), gpsBody()] } });
    t.is(b.status, 201, b.text);
    t.is(b.headers.get('x-ratelimit-remaining'), String(29 - 2 * i));
    t.is((await s.request('POST', '/v1/gps', { token: other.key, body: gpsBody() })).status, 201);
  }
  t.is((await s.request('POST', '/v1/gps/batch', { token: other.key, body: { points: [gpsBody()] } })).status, 429);
  t.is((await s.request('POST', '/v1/gps', { token: other.key, body: gpsBody() })).status, 429);
});
