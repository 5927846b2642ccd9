import test from 'ava';
import Koa from 'koa';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { IndexedRouter } from '../../api/indexedRouter';
import { errorHandler } from '../../api/middleware/errors';
import { serviceUnavailable } from '../../shared/errors';

/** An app whose logger writes to `lines`, with a route that fails as an unreachable database does. */
async function appLogging(lines: string[]) {
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    }),
  );
  const unreachable = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  const router = new IndexedRouter();
  router.delete('/v1/sessions/:token', () => {
    throw unreachable();
  });
  // A statement whose connection broke: knex puts the statement, values included, in front.
  router.get('/v1/users/:id', (ctx) => {
    throw new Error(`select * from "users" where "id" = '${ctx.params.id}' - Connection terminated unexpectedly`);
  });
  router.get('/v1/users/email/:email', () => {
    throw new Error('a bug');
  });
  // A statement that ran past statement_timeout on a database that answers (a lock, a slow plan).
  const statementTimeout = () =>
    Object.assign(new Error('select 1 - canceling statement due to statement timeout'), { code: '57014' });
  router.get('/v1/trips/:id', () => {
    throw statementTimeout();
  });
  router.get('/v1/devices/:id', () => {
    throw statementTimeout();
  });
  // A transaction whose statement was cut off (shared/db.ts answers it as a 503 of its own).
  router.get('/v1/geofences/:id', () => {
    throw Object.assign(serviceUnavailable('the database is unreachable; try again shortly'), {
      cause: new Error(`insert into "geofence_events" values ('x') - Connection terminated unexpectedly`),
    });
  });
  const app = new Koa();
  app.use(errorHandler(logger));
  // A layer before the router (as the credential layer is) that fails on its own.
  app.use((ctx, next) => {
    if (ctx.get('x-fail-early')) throw Object.assign(new Error('timeout expired'));
    return next();
  });
  app.use(router.routes());
  const server = app.listen(0);
  await new Promise((r) => server.once('listening', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

test('a failed request logs its route pattern, never a token or address from its path', async (t) => {
  const lines: string[] = [];
  const { server, url } = await appLogging(lines);
  try {
    const token = 'sess_SECRETtoken0123456789';
    const a = await fetch(`${url}/v1/sessions/${token}`, { method: 'DELETE' });
    t.is(a.status, 503);
    const b = await fetch(`${url}/v1/users/email/someone%40example.com`);
    t.is(b.status, 500);
    const c = await fetch(`${url}/v1/sessions/${token}`, { headers: { 'x-fail-early': '1' } });
    t.is(c.status, 503);
    const logged = lines.map((l) => JSON.parse(l) as { path: string; msg: string });
    t.deepEqual(
      logged.map((l) => [l.msg, l.path]),
      [
        ['dependency unavailable', '/v1/sessions/:token'],
        ['unhandled error', '/v1/users/email/:email'],
        ['dependency unavailable', '/v1/sessions/…'],
      ],
    );
    const all = lines.join('\n');
    t.false(all.includes('SECRET'), all);
    t.false(all.includes('someone'), all);
  } finally {
    server.close();
  }
});

test('a database outage logs each reason once with how many requests it stands for; every 500 is logged', async (t) => {
  const lines: string[] = [];
  const { server, url } = await appLogging(lines);
  try {
    for (let i = 0; i < 50; i++) {
      t.is((await fetch(`${url}/v1/sessions/sess_${i}`, { method: 'DELETE' })).status, 503);
      t.is((await fetch(`${url}/v1/users/someone-${i}`)).status, 503);
      if (i % 10 === 0) t.is((await fetch(`${url}/v1/users/email/x${i}%40example.com`)).status, 500);
    }
    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    t.deepEqual(
      logged.map((l) => l.msg),
      ['dependency unavailable', 'dependency unavailable', ...Array<string>(5).fill('unhandled error')],
    );
    t.deepEqual(
      logged.slice(0, 2).map((l) => l.err),
      ['connect ECONNREFUSED 127.0.0.1:5432', 'Connection terminated unexpectedly'],
    );
    // The statement and its values stay out of the log.
    t.false(lines.join('\n').includes('someone'), lines.join('\n'));
  } finally {
    server.close();
  }
});

test('statement timeouts on a database that answers are logged each time with their route, not folded as an outage', async (t) => {
  // A lock or a slow plan on one table is no outage: folding would hide which routes time out,
  // and the next answered statement would log a "reachable again" that never went away.
  const lines: string[] = [];
  const { server, url } = await appLogging(lines);
  try {
    for (const path of ['/v1/trips/a', '/v1/devices/b', '/v1/trips/c']) t.is((await fetch(url + path)).status, 503);
    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    t.deepEqual(
      logged.map((l) => [l.msg, l.path]),
      [
        ['dependency unavailable', '/v1/trips/:id'],
        ['dependency unavailable', '/v1/devices/:id'],
        ['dependency unavailable', '/v1/trips/:id'],
      ],
    );
    t.false(
      logged.some((l) => 'repeated' in l),
      JSON.stringify(logged),
    );
  } finally {
    server.close();
  }
});

test('a 503 the service made of a cut-off database statement is logged as the outage it is', async (t) => {
  const lines: string[] = [];
  const { server, url } = await appLogging(lines);
  try {
    for (let i = 0; i < 5; i++) t.is((await fetch(`${url}/v1/geofences/g${i}`)).status, 503);
    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    t.deepEqual(
      logged.map((l) => [l.msg, l.err, l.path]),
      [['dependency unavailable', 'Connection terminated unexpectedly', '/v1/geofences/:id']],
    );
  } finally {
    server.close();
  }
});

test('every answer has a request id; a 500 quotes it, and its log line carries it', async (t) => {
  const lines: string[] = [];
  const { server, url } = await appLogging(lines);
  try {
    const failed = await fetch(`${url}/v1/users/email/x`);
    t.is(failed.status, 500);
    const id = failed.headers.get('x-request-id') ?? '';
    t.regex(id, /^[0-9a-f]{12}-[0-9a-z]+$/);
    t.regex(((await failed.json()) as { message: string }).message, new RegExp(`request id ${id}`));
    const logged = lines.map((l) => JSON.parse(l) as { msg: string; requestId?: string });
    t.deepEqual(
      logged.filter((l) => l.msg === 'unhandled error').map((l) => l.requestId),
      [id],
    );
    // One a proxy sent is kept; one that is not a plain short token is replaced.
    const given = await fetch(`${url}/v1/no-route`, { headers: { 'x-request-id': 'edge-7f3a.42' } });
    t.is(given.headers.get('x-request-id'), 'edge-7f3a.42');
    const junk = await fetch(`${url}/v1/no-route`, { headers: { 'x-request-id': 'a b<script>' } });
    t.regex(junk.headers.get('x-request-id') ?? '', /^[0-9a-f]{12}-[0-9a-z]+$/);
    const other = await fetch(`${url}/v1/no-route`);
    t.not(other.headers.get('x-request-id'), junk.headers.get('x-request-id'));
  } finally {
    server.close();
  }
});
