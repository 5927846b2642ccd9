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

test.serial('an IPv6 client is one bucket per /64; an IPv4-mapped address is its IPv4 client', async (t) => {
  const s = stack();
  // Five addresses of one /64 (a client given the usual /64 rotating through it): one bucket of 3,
  // however they are spelt (upper case, leading zeros, a zone id).
  const spellings = [
    '2001:db8:a:b::1',
    '2001:DB8:A:B::2',
    '2001:0db8:000a:000b::3',
    '2001:db8:a:b::4%x-y',
    '2001:db8:a:b::5%1',
  ];
  const statuses: number[] = [];
  for (const ip of spellings) statuses.push((await s.request('GET', '/v1', via(null, ip))).status);
  t.deepEqual(statuses, [200, 200, 200, 429, 429]);
  // The next /64 is someone else.
  const neighbour = await s.request('GET', '/v1', via(null, '2001:db8:a:c::1'));
  t.is(neighbour.status, 200);
  t.is(neighbour.headers.get('x-ratelimit-remaining'), '2');
  // What a dual-stack socket reports for an IPv4 client shares that client's bucket.
  t.is((await s.request('GET', '/v1', via(null, '198.51.100.20'))).headers.get('x-ratelimit-remaining'), '2');
  const mapped = await s.request('GET', '/v1', via(null, '::ffff:198.51.100.20'));
  t.is(mapped.headers.get('x-ratelimit-remaining'), '1');
});

test.serial(
  'an entry that is not an address is not believed: junk rotated by a client counts as its peer address',
  async (t) => {
    const s = stack();
    // A client reaching the api itself (or through a proxy passing its header on) writes junk, new
    // each time: every request counts as the socket's address (127.0.0.1), limited after 3.
    const junk = ['not-an-ip-1', 'x'.repeat(100), '1.2.3.4%eth0', 'not-an-ip-2', 'not-an-ip-3'];
    const statuses: number[] = [];
    for (const entry of junk) statuses.push((await s.request('GET', '/v1', via(null, entry))).status);
    t.deepEqual(statuses, [200, 200, 200, 429, 429]);
    // The peer's own bucket, reached without any header.
    const plain = await s.request('GET', '/v1');
    t.is(plain.status, 429);
    // An IPv6 address is believed without its zone id (/v1 shows the address the api uses).
    const zoned = await s.request('GET', '/v1', via(null, '2001:db8:f::1%eth0'));
    t.is(zoned.status, 200);
    t.is(zoned.body.client.ip, '2001:db8:f::1');
  },
);
