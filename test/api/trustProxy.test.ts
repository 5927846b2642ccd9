import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

// One proxy in front, which appends the address it saw (nginx's $proxy_add_x_forwarded_for).
const stack = useStack(test, {
  env: { TRUST_PROXY: 'true', RATE_LIMIT_ANONYMOUS: '3', RATE_LIMIT_USER: '4', RATE_LIMIT_WINDOW_SECONDS: '60' },
});

const via = (clientSent: string | null, proxySaw: string) => ({
  headers: { 'x-forwarded-for': clientSent ? `${clientSent}, ${proxySaw}` : proxySaw },
});

test.serial('behind a proxy, the client is the address the proxy appended, not what the client wrote', async (t) => {
  const s = stack();
  // The same client, a new made-up X-Forwarded-For each time: one bucket, limited after 3.
  const statuses: number[] = [];
  for (let i = 1; i <= 5; i++)
    statuses.push((await s.request('GET', '/v1', via(`203.0.113.${i}, 10.0.0.${i}`, '198.51.100.7'))).status);
  t.deepEqual(statuses, [200, 200, 200, 429, 429]);
  // Another client the proxy saw has its own bucket.
  const other = await s.request('GET', '/v1', via('198.51.100.7', '198.51.100.8'));
  t.is(other.status, 200);
  t.is(other.headers.get('x-ratelimit-remaining'), '2');
});

test.serial('a malformed body or URL is counted and carries the rate-limit headers', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const bad = await s.request('POST', '/v1/trips', { token: user.token, rawBody: '{bad' });
  t.is(bad.status, 400, bad.text);
  t.is(bad.headers.get('x-ratelimit-limit'), '4');
  t.is(bad.headers.get('x-ratelimit-remaining'), '3');
  const text = await s.request('POST', '/v1/trips', {
    token: user.token,
    rawBody: 'x',
    headers: { 'content-type': 'text/plain' },
  });
  t.is(text.status, 415, text.text);
  t.is(text.headers.get('x-ratelimit-remaining'), '2');
  const nul = await s.request('GET', '/v1/trips?status=%00', { token: user.token });
  t.is(nul.status, 400, nul.text);
  t.is(nul.headers.get('x-ratelimit-remaining'), '1');
});
