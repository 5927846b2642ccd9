import test, { ExecutionContext } from 'ava';
import { createKey, createUser } from '../helpers/factories';
import { startSecondApi } from '../helpers/secondApi';
import { useStack } from '../helpers/stack';
import { eventually } from '../helpers/wait';

const WINDOW_SECONDS = 600;
// Each test uses its own X-Forwarded-For address or credential, so the tests do not share counters.
const stack = useStack(test, {
  env: {
    TRUST_PROXY: 'true',
    RATE_LIMIT_WINDOW_SECONDS: String(WINDOW_SECONDS),
    RATE_LIMIT_GPS_POST_WINDOW_SECONDS: String(WINDOW_SECONDS),
    RATE_LIMIT_USER: '6',
    RATE_LIMIT_ANONYMOUS: '120',
    // Large enough that the limiter counts locally far from the limit (its fast path).
    RATE_LIMIT_API_KEY: '400',
    RATE_LIMIT_GPS_POST: '30',
  },
});

interface Answer {
  status: number;
  remaining: string | null;
  retryAfter: string | null;
}

async function call(
  base: string,
  path: string,
  opts: { method?: string; headers?: Record<string, string>; body?: unknown } = {},
): Promise<Answer> {
  const headers = { ...opts.headers, ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }) };
  const r = await fetch(base + path, {
    method: opts.method ?? 'GET',
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  await r.text();
  return {
    status: r.status,
    remaining: r.headers.get('x-ratelimit-remaining'),
    retryAfter: r.headers.get('retry-after'),
  };
}

/** Windows are aligned to the epoch: start in a fresh one when the current one is about to end, so a test stays in one window. */
async function roomInWindow(): Promise<void> {
  const left = WINDOW_SECONDS * 1000 - (Date.now() % (WINDOW_SECONDS * 1000));
  if (left < 30_000) await new Promise((r) => setTimeout(r, left + 100));
}

/** Sends `n` requests alternating between the bases, at most `parallel` in flight; returns the answers. */
async function burst(
  bases: string[],
  n: number,
  parallel: number,
  send: (base: string) => Promise<Answer>,
): Promise<Answer[]> {
  const out: Answer[] = [];
  let next = 0;
  const lane = async () => {
    while (next < n) {
      const i = next++;
      out[i] = await send(bases[i % bases.length]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, n) }, lane));
  return out;
}

/** Every refusal says 0 remaining and when to retry; `limit` requests (1% more at most) were let through. */
function assertAllowed(t: ExecutionContext, answers: Answer[], limit: number): void {
  const allowed = answers.filter((a) => a.status !== 429);
  const refused = answers.filter((a) => a.status === 429);
  t.true(
    allowed.length >= limit && allowed.length <= Math.floor(limit * 1.01),
    `allowed ${allowed.length} of ${answers.length}, limit ${limit}`,
  );
  for (const a of refused) {
    t.is(a.remaining, '0');
    t.true(Number(a.retryAfter) >= 1);
  }
  for (const a of allowed) t.true(Number(a.remaining) >= 0 && Number(a.remaining) < limit);
  t.true(
    allowed.some((a) => a.remaining === '0'),
    'the request that reaches the limit says 0 remaining',
  );
}

test.serial('two api instances share one counter per identity', async (t) => {
  const s = stack();
  const second = await startSecondApi(s);
  try {
    await roomInWindow();
    const user = await createUser(s.db);
    const get = async (base: string) => {
      const r = await fetch(`${base}/v1`, { headers: { authorization: `Bearer ${user.token}` } });
      await r.text();
      return r;
    };
    // The user's count in Redis (its window's key), where both instances add theirs.
    const counted = async () => {
      const keys = await s.redis.keys(`${s.config.redisPrefix}rl:user:user:${user.id}:*`);
      return keys.length ? (await s.redis.mget(...keys)).reduce((n, v) => n + Number(v ?? 0), 0) : 0;
    };
    for (let i = 0; i < 3; i++) t.is((await get(s.url)).status, 200);
    // Counts reach Redis within one flush; then the other instance sees them.
    await eventually(async () => (await counted()) === 3);
    const seen = [];
    for (let i = 0; i < 3; i++) seen.push(await get(second.url));
    t.deepEqual(
      seen.map((r) => r.headers.get('x-ratelimit-remaining')),
      ['2', '1', '0'],
    );
    await eventually(async () => (await counted()) === 6);
    const over = await get(s.url);
    t.is(over.status, 429);
    t.is((await get(second.url)).status, 429);
  } finally {
    await second.close();
  }
});

test.serial(
  'sequential anonymous requests alternating between two instances: exactly the limit, then 429',
  async (t) => {
    const s = stack();
    const second = await startSecondApi(s);
    try {
      await roomInWindow();
      const headers = { 'x-forwarded-for': '10.0.0.1' };
      const bases = [s.url, second.url];
      for (let i = 1; i <= 120; i++) {
        const r = await call(bases[i % 2], '/v1', { headers });
        t.is(r.status, 200, `request ${i}`);
        t.is(r.remaining, String(120 - i), `request ${i}`);
      }
      for (let i = 0; i < 4; i++) {
        const r = await call(bases[i % 2], '/v1', { headers });
        t.is(r.status, 429);
        t.is(r.remaining, '0');
      }
    } finally {
      await second.close();
    }
  },
);

test.serial('a burst of 5× the anonymous limit over two instances lets exactly the limit through', async (t) => {
  const s = stack();
  const second = await startSecondApi(s);
  try {
    await roomInWindow();
    const headers = { 'x-forwarded-for': '10.0.0.2' };
    const answers = await burst([s.url, second.url], 600, 600, (base) => call(base, '/v1', { headers }));
    assertAllowed(t, answers, 120);
  } finally {
    await second.close();
  }
});

test.serial(
  'API key tier: sequential requests alternating between two instances, counted locally far from the limit',
  async (t) => {
    const s = stack();
    const second = await startSecondApi(s);
    try {
      await roomInWindow();
      const owner = await createUser(s.db);
      const key = await createKey({ userId: owner.id, scopes: ['gps:read'] });
      const headers = { authorization: `Bearer ${key.key}` };
      const bases = [s.url, second.url];
      const answers: Answer[] = [];
      for (let i = 0; i < 410; i++) answers.push(await call(bases[i % 2], '/v1', { headers }));
      t.deepEqual(
        answers.map((a) => a.status),
        [...Array(400).fill(200), ...Array(10).fill(429)],
      );
      // Counted locally, an instance does not yet know the other's latest requests: its remaining is
      // never below the true one, and falls by one with each of its own requests.
      const remaining = answers.slice(0, 400).map((a) => Number(a.remaining));
      remaining.forEach((r, i) =>
        t.true(r >= 400 - (i + 1) && (i < 2 || r < remaining[i - 2]), `request ${i + 1}: ${r} remaining`),
      );
      t.is(remaining[399], 0);
      assertAllowed(t, answers, 400);
    } finally {
      await second.close();
    }
  },
);

test.serial(
  'API key tier: a burst of 5× the limit over two instances lets the limit through (1% more at most)',
  async (t) => {
    const s = stack();
    const second = await startSecondApi(s);
    try {
      await roomInWindow();
      const owner = await createUser(s.db);
      const key = await createKey({ userId: owner.id, scopes: ['gps:read'] });
      const headers = { authorization: `Bearer ${key.key}` };
      const answers = await burst([s.url, second.url], 2000, 400, (base) => call(base, '/v1', { headers }));
      assertAllowed(t, answers, 400);
    } finally {
      await second.close();
    }
  },
);

test.serial(
  'POST /v1/gps: a burst over two instances lets exactly its own limit through (two counters per request)',
  async (t) => {
    const s = stack();
    const second = await startSecondApi(s);
    try {
      await roomInWindow();
      const owner = await createUser(s.db);
      const key = await createKey({ userId: owner.id, scopes: ['gps:write'] });
      const headers = { authorization: `Bearer ${key.key}` };
      const answers = await burst([s.url, second.url], 150, 150, (base) =>
        call(base, '/v1/gps', { method: 'POST', headers, body: {} }),
      );
      assertAllowed(t, answers, 30);
    } finally {
      await second.close();
    }
  },
);
