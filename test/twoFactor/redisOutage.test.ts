import test from 'ava';
import { TWO_FACTOR_THROTTLE } from '../../shared/caches/twoFactorThrottle';
import { setClockOffset } from '../../shared/clock';
import { hashPassword } from '../../shared/domain/passwords';
import { createUser } from '../helpers/factories';
import { PrivateRedis, startPrivateRedis } from '../helpers/redisServer';
import { Stack, startStack } from '../helpers/stack';
import { codeNow, enableTwoFactor, nextStep } from './helpers';

// One private redis-server the test stops: 2FA keeps its rules without Redis and never waits on it.
let redis: PrivateRedis;
let s: Stack;

test.before(async () => {
  redis = await startPrivateRedis();
  s = await startStack({ env: { REDIS_URL: redis.url, RATE_LIMIT_ANONYMOUS: '100000' } });
});

test.after.always(async () => {
  setClockOffset(0);
  await redis?.start().catch(() => undefined);
  await s?.close();
  await redis?.stop();
});

test.serial(
  'with Redis down: sign-in with a code works, a replay is refused, wrong codes still lock out',
  async (t) => {
    const u = await createUser(s.db);
    await s
      .db('platform_accounts')
      .where('user_id', u.id)
      .update({ password_hash: await hashPassword('pw-123456789') });
    const { secret } = await enableTwoFactor(s, u.token);
    await redis.stop();

    const timed = async <T>(fn: () => Promise<T>) => {
      const start = performance.now();
      const r = await fn();
      t.true(performance.now() - start < 5000, 'no request waits on the dead Redis');
      return r;
    };
    const challenge = async () =>
      (await timed(() => s.request('POST', '/v1/auth/login', { body: { email: u.email, password: 'pw-123456789' } })))
        .body.challenge_token as string;

    const code = codeNow(secret);
    const c1 = await challenge();
    const first = await timed(() => s.request('POST', '/v1/auth/2fa/check', { body: { challenge_token: c1, code } }));
    t.is(first.status, 200, first.text);
    const c2 = await challenge();
    const replay = await timed(() => s.request('POST', '/v1/auth/2fa/check', { body: { challenge_token: c2, code } }));
    t.is(replay.status, 400, 'the database refuses the step already used');

    nextStep();
    const right = codeNow(secret);
    // The replay is no guess (the right code again): it counts nowhere, five wrong codes reach the limit.
    for (let i = 0; i < TWO_FACTOR_THROTTLE.maxFailures; i++) {
      const wrong = String(100000 + i * 7919) === right ? '999999' : String(100000 + i * 7919);
      const r = await timed(() =>
        s.request('POST', '/v1/auth/2fa/check', { body: { challenge_token: c2, code: wrong } }),
      );
      t.is(r.status, 400);
    }
    const locked = await timed(() =>
      s.request('POST', '/v1/auth/2fa/check', { body: { challenge_token: c2, code: right } }),
    );
    t.is(locked.status, 429);
    t.truthy(locked.headers.get('retry-after'));
  },
);

test.serial(
  'a lock-out set before Redis hangs holds while it hangs, on every api, and counting goes on where it was',
  async (t) => {
    await redis.start();
    const u = await createUser(s.db);
    await s
      .db('platform_accounts')
      .where('user_id', u.id)
      .update({ password_hash: await hashPassword('pw-123456789') });
    const { startSecondApi } = await import('../helpers/secondApi');
    const second = await startSecondApi(s);
    const login = (url: string, password: string) =>
      fetch(`${url}/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: u.email, password }),
      }).then((r) => r.status);
    try {
      // Four wrong passwords while Redis answers...
      for (let i = 0; i < 4; i++) t.is(await login(s.url, `wrong-${i}`), 401);
      redis.freeze();
      try {
        // ...the fifth while it hangs, on the other api: the account is now locked everywhere.
        t.is(await login(second.url, 'wrong-4'), 401);
        t.is(await login(s.url, 'pw-123456789'), 429, 'the right password is refused while locked');
        t.is(await login(second.url, 'pw-123456789'), 429);
      } finally {
        redis.thaw();
      }
      t.is(await login(s.url, 'pw-123456789'), 429, 'still locked once Redis answers');
    } finally {
      await second.close();
    }
  },
);
