import test from 'ava';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody } from '../helpers/tracking';

// Default limit (30); a long window so the test never straddles a window boundary.
const stack = useStack(test, { env: { RATE_LIMIT_GPS_POST_WINDOW_SECONDS: '3600' } });

test('POST /v1/gps allows 30 requests per window by default, then 429 with rate-limit headers; the batch route is not in that tier', async (t) => {
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
  t.is(batch.status, 201);
});
