import test from 'ava';
import Koa from 'koa';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { IndexedRouter } from '../../api/indexedRouter';
import { errorHandler } from '../../api/middleware/errors';

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
  router.get('/v1/users/email/:email', () => {
    throw new Error('a bug');
  });
  const app = new Koa();
  app.use(errorHandler(logger));
  // A layer before the router (as the credential layer is) that fails on its own.
  app.use((ctx, next) => {
    if (ctx.get('x-fail-early')) throw unreachable();
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
