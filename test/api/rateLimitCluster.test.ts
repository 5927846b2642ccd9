import test from 'ava';
import { createUser } from '../helpers/factories';
import { startSecondApi } from '../helpers/secondApi';
import { useStack } from '../helpers/stack';

const stack = useStack(test, { env: { RATE_LIMIT_USER: '6' } });

test('two api instances share one counter per identity', async (t) => {
  const s = stack();
  const second = await startSecondApi(s);
  try {
    const user = await createUser(s.db);
    const get = async (base: string) => {
      const r = await fetch(`${base}/v1`, { headers: { authorization: `Bearer ${user.token}` } });
      await r.text();
      return r;
    };
    for (let i = 0; i < 3; i++) t.is((await get(s.url)).status, 200);
    // Counts reach Redis within one flush; then the other instance sees them.
    await new Promise((r) => setTimeout(r, 100));
    const seen = [];
    for (let i = 0; i < 3; i++) seen.push(await get(second.url));
    t.deepEqual(seen.map((r) => r.headers.get('x-ratelimit-remaining')), ['2', '1', '0']);
    await new Promise((r) => setTimeout(r, 100));
    const over = await get(s.url);
    t.is(over.status, 429);
    t.is((await get(second.url)).status, 429);
  } finally {
    await second.close();
  }
});
