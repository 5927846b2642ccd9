import test from 'ava';
import { Model } from 'objection';
import { startApi } from '../../api/server';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { startTcpProxy } from '../helpers/tcpProxy';

const stack = useStack(test);

test('a PostgreSQL that stops answering with its connections open: 503s within the request timeout, then recovery', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const db = new URL(s.config.databaseUrl);
  const proxy = await startTcpProxy(db.hostname, Number(db.port || 5432));
  db.hostname = '127.0.0.1';
  db.port = String(proxy.port);
  // An api whose database is behind the proxy, with a short request timeout.
  const api = await startApi(
    { ...s.config, databaseUrl: db.toString(), databaseRequestTimeoutMs: 1500 },
    {
      port: 0,
      drainIdleGraceMs: 0,
    },
  );
  Model.knex(s.db);
  const url = `http://127.0.0.1:${api.port}`;
  const get = async (path: string) => {
    const started = performance.now();
    const r = await fetch(url + path, { headers: { authorization: `Bearer ${admin.token}` } });
    return {
      status: r.status,
      retryAfter: r.headers.get('retry-after'),
      body: await r.text(),
      ms: performance.now() - started,
    };
  };
  try {
    // Warm: the credential is cached and the pool holds connections through the proxy.
    t.is((await get('/v1/devices')).status, 200);
    proxy.freeze();
    // More requests than the pool has connections: some hold a frozen connection, others wait for one.
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => get(i % 2 ? `/v1/devices?page=${i + 1}` : `/v1/trips?page=${i + 1}`)),
    );
    for (const a of answers) {
      t.is(a.status, 503, a.body);
      t.truthy(a.retryAfter);
      t.true(a.ms < 5000, `answered after ${Math.round(a.ms)} ms`);
    }
    proxy.thaw();
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      status = (await get('/v1/devices')).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    t.is(status, 200);
  } finally {
    proxy.thaw();
    await api.close();
    Model.knex(s.db);
    await proxy.close();
  }
});
