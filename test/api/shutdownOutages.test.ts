import test from 'ava';
import { Model } from 'objection';
import { startApi } from '../../api/server';
import { createUser } from '../helpers/factories';
import { freePort, spawnService, type ServiceProcess } from '../helpers/processes';
import { useOutageStack } from '../helpers/outageStack';
import { startTcpProxy } from '../helpers/tcpProxy';
import { orAfter } from '../helpers/wait';

/**
 * A process asked to stop while PostgreSQL or Redis hangs (or is gone) still stops in bounded
 * time: its last writes and disconnects share one deadline (shared/shutdown.ts), and the workers
 * stop waiting on Redis once no job runs. Before, each waited as long as the outage lasted.
 */
const outage = useOutageStack(test);

/** SIGTERM to each process; resolves with each one's exit code and seconds to exit (null: still running after `ms`). */
async function stopAll(
  ps: ServiceProcess[],
  ms: number,
): Promise<Array<{ code: number | null; seconds: number } | null>> {
  const sent = Date.now();
  for (const p of ps) p.child.kill('SIGTERM');
  return Promise.all(
    ps.map((p) =>
      orAfter(
        p.exited.then((e) => ({ code: e.code, seconds: (e.at - sent) / 1000 })),
        ms,
        null,
      ),
    ),
  );
}

test.serial('SIGTERM while Redis hangs: workers, realtime and api exit 0 within seconds', async (t) => {
  const { redis, stack: s, services } = outage();
  const port = await freePort();
  const env = { ...s.env, PORT: String(port), REALTIME_PORT: String(await freePort()) };
  const ps = [
    await spawnService('workers', env, 'workers ready'),
    await spawnService('realtime', env, 'realtime listening'),
    await spawnService('api', env, 'api listening'),
  ];
  services.push(...ps);
  redis.freeze();
  await new Promise((r) => setTimeout(r, 1000));
  const exits = await stopAll(ps, 15_000);
  redis.thaw();
  for (const [i, name] of ['workers', 'realtime', 'api'].entries()) {
    t.truthy(exits[i], `${name} still running 15 s after SIGTERM`);
    t.is(exits[i]?.code, 0, name);
    t.true((exits[i]?.seconds ?? 99) < 10, `${name} took ${exits[i]?.seconds} s`);
  }
});

test.serial('SIGTERM while Redis is gone: workers and realtime exit 0 within seconds', async (t) => {
  const { redis, stack: s, services } = outage();
  const env = { ...s.env, REALTIME_PORT: String(await freePort()) };
  const ps = [
    await spawnService('workers', env, 'workers ready'),
    await spawnService('realtime', env, 'realtime listening'),
  ];
  services.push(...ps);
  await redis.stop();
  await new Promise((r) => setTimeout(r, 1000));
  const exits = await stopAll(ps, 15_000);
  await redis.start();
  for (const [i, name] of ['workers', 'realtime'].entries()) {
    t.truthy(exits[i], `${name} still running 15 s after SIGTERM`);
    t.is(exits[i]?.code, 0, name);
    t.true((exits[i]?.seconds ?? 99) < 10, `${name} took ${exits[i]?.seconds} s`);
  }
});

test.serial('an api stops within its release budget while PostgreSQL hangs', async (t) => {
  const { stack: s } = outage();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const db = new URL(s.config.databaseUrl);
  const proxy = await startTcpProxy(db.hostname, Number(db.port || 5432));
  db.hostname = '127.0.0.1';
  db.port = String(proxy.port);
  // The default request timeout (10 s): each hung statement of the shutdown would wait that long.
  const api = await startApi({ ...s.config, databaseUrl: db.toString() }, { port: 0, drainIdleGraceMs: 0 });
  Model.knex(s.db);
  try {
    const r = await fetch(`http://127.0.0.1:${api.port}/v1/devices`, {
      headers: { authorization: `Bearer ${admin.token}` },
    });
    t.is(r.status, 200);
    proxy.freeze();
    const started = Date.now();
    await api.close();
    const seconds = (Date.now() - started) / 1000;
    t.true(seconds < 6, `close took ${seconds} s`);
  } finally {
    proxy.thaw();
    await proxy.close();
    Model.knex(s.db);
  }
});
