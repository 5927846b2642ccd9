import test from 'ava';
import { Model } from 'objection';
import { startApi } from '../../api/server';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { startTcpProxy } from '../helpers/tcpProxy';
import { eventually } from '../helpers/wait';
import { QUERY_OUTCOME_UNKNOWN, toHttpError } from '../../shared/errors';
import { createDb, transaction } from '../../shared/db';

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

test('a connection dropped with a COMMIT or a lone write out: 503 "check before repeating", and the write may be there', async (t) => {
  // The server may have committed before the connection went: "try again" would have a tracker
  // store its point twice. A connection refused (nothing sent) still says "try again".
  const s = stack();
  const url = new URL(s.config.databaseUrl);
  const proxy = await startTcpProxy(url.hostname, Number(url.port || 5432));
  url.hostname = '127.0.0.1';
  url.port = String(proxy.port);
  const db = createDb({ ...s.config, databaseUrl: url.toString() }, { poolMax: 2, serving: true });
  const name = () => `cut-${Math.random().toString(36).slice(2)}`;
  /**
   * Cuts the connection once `tookEffect` holds (a write the server committed, seen from another
   * connection: a fixed pause let a loaded CI host cut before the COMMIT arrived), else after 300 ms.
   */
  const cutAfter = async <T>(p: Promise<T>, tookEffect?: () => Promise<unknown>) => {
    if (tookEffect) await eventually(tookEffect, 10_000);
    else await new Promise((r) => setTimeout(r, 300));
    proxy.cut();
    return p.then(
      () => {
        throw new Error('expected a failure');
      },
      (err: unknown) => toHttpError(err),
    );
  };
  try {
    // In a transaction: the INSERT answered, the COMMIT sent, its answer never came.
    const inTx = name();
    const committing = transaction(db, async (trx) => {
      await trx('trip_categories').insert({ name: inTx });
      proxy.holdReplies();
    });
    const stored = (n: string) => () => s.db('trip_categories').where('name', n).first();
    const txErr = await cutAfter(committing, stored(inTx));
    t.is(txErr?.status, 503);
    t.is(txErr?.message, QUERY_OUTCOME_UNKNOWN);
    t.truthy(await s.db('trip_categories').where('name', inTx).first(), 'the COMMIT took effect');
    // In a transaction, a statement cut off before the COMMIT: rolled back, so "try again".
    const rolledBack = name();
    await db.raw('SELECT 1');
    const cutInTx = cutAfter(
      transaction(db, async (trx) => {
        proxy.holdReplies();
        await trx('trip_categories').insert({ name: rolledBack });
      }),
    );
    const cutErr = await cutInTx;
    t.is(cutErr?.status, 503);
    t.regex(cutErr?.message ?? '', /unreachable; try again/);
    t.falsy(await s.db('trip_categories').where('name', rolledBack).first());
    // A statement on its own (autocommit).
    const alone = name();
    await db.raw('SELECT 1');
    proxy.holdReplies();
    const aloneErr = await cutAfter(
      db('trip_categories')
        .insert({ name: alone })
        .then(() => undefined),
      stored(alone),
    );
    t.is(aloneErr?.status, 503);
    t.is(aloneErr?.message, QUERY_OUTCOME_UNKNOWN);
    t.truthy(await s.db('trip_categories').where('name', alone).first(), 'the INSERT took effect');
    // Nothing sent: the server is not there at all.
    await proxy.close();
    const refused = await db('trip_categories')
      .insert({ name: name() })
      .then(() => undefined)
      .catch((err: unknown) => toHttpError(err));
    t.is(refused?.status, 503);
    t.regex(refused?.message ?? '', /unreachable; try again/);
  } finally {
    await db.destroy();
    await proxy.close().catch(() => undefined);
  }
});
