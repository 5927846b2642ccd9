import test from 'ava';
import { useStack } from '../helpers/stack';

// One proxy in front, which appends the address it saw (nginx's $proxy_add_x_forwarded_for).
const stack = useStack(test, {
  env: { TRUST_PROXY: 'true', RATE_LIMIT_ANONYMOUS: '3', RATE_LIMIT_WINDOW_SECONDS: '60' },
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
