import test from 'ava';
import { spawnService } from '../helpers/processes';
import { useOutageStack } from '../helpers/outageStack';
import { sleep } from '../helpers/wait';
import { createKey, createUser } from '../helpers/factories';
import { gpsBody } from '../helpers/tracking';

/**
 * A Redis outage is logged, not shouted: ioredis retries every connection (a workers process has
 * one per queue, and its BullMQ workers pass their errors on), and each failed attempt is an
 * 'error'. The operator sees each distinct error once per ten seconds, with how many it stands
 * for, and one line when Redis is back.
 */
const outage = useOutageStack(test);

test('an outage of several seconds logs each error once per process, and its end once', async (t) => {
  const { redis, stack: s, services } = outage();
  services.push(await spawnService('workers', s.env, 'workers ready'));
  services.push(await spawnService('api', { ...s.env, PORT: '0' }, 'api listening'));
  const port = (await services[1].waitForLog('api listening')).port as number;
  const owner = await createUser(s.db, { roles: ['role_developer'] });
  const key = await createKey({ userId: owner.id, scopes: ['gps:write'] });
  const seen = services.map((p) => p.logs.length);
  const stderrBefore = services.map((p) => p.stderr().length);
  await redis.stop();
  // Long enough for every connection to fail several reconnect attempts (ioredis waits 50 ms more
  // each time, up to 2 s), well within one repeat interval. Meanwhile GPS points keep coming: each
  // fails to raise the latest-point cache, which is folded into the Redis errors, not a line each.
  const until = Date.now() + 6000;
  let posted = 0;
  while (Date.now() < until) {
    const r = await fetch(`http://127.0.0.1:${port}/v1/gps`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(gpsBody({ device_id: 'log-flood', timestamp: Math.floor(Date.now() / 1000) })),
    });
    if (r.status === 201) posted++;
    await sleep(200);
  }
  t.true(posted >= 10, `${posted} points accepted during the outage`);
  for (const [i, p] of services.entries()) {
    const name = i === 0 ? 'workers' : 'api';
    const warnings = p.logs.slice(seen[i]).filter((l) => (l.level as number) >= 40);
    // A relay of side effects (the points' pushes) says once that it retries; later attempts are debug.
    const relay = warnings.filter((l) => l.msg === 'could not relay side effects; retrying');
    t.true(relay.length <= 1, `${name}: ${relay.length} relay warnings`);
    const lines = warnings.filter((l) => !relay.includes(l));
    t.true(lines.length >= 1, `${name}: the outage is logged`);
    t.true(
      lines.every((l) => l.msg === 'redis error' && typeof l.err === 'string' && typeof l.connection === 'string'),
      `${name}: ${JSON.stringify(lines.slice(0, 3))}`,
    );
    // Each distinct message once: a handful of lines, not one per connection and attempt.
    const distinct = new Set(lines.map((l) => l.err as string));
    t.is(lines.length, distinct.size, `${name}: ${lines.length} lines for ${distinct.size} distinct errors`);
    t.true(lines.length <= 4, `${name}: ${lines.length} lines in 6 s`);
    // Nothing bypasses the log: BullMQ prints an error of a queue without a listener on stderr.
    t.is(p.stderr().slice(stderrBefore[i]), '', `${name}: stderr during the outage`);
  }
  await redis.start();
  for (const p of services) {
    const back = await p.waitForLog('redis reachable again', 15_000);
    // The repeats the folded lines stood for are counted, not lost.
    t.true((back.repeated as number) > 0, JSON.stringify(back));
    // How long it was away: from the first error to the first connection ready again (6 s and more).
    t.true((back.outageMs as number) >= 5000, JSON.stringify(back));
  }
});
