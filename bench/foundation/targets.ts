import 'reflect-metadata';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { authenticate, rejectFailedCredentials } from '../../api/middleware/auth';
import { bodyParser } from '../../api/middleware/body';
import { errorHandler } from '../../api/middleware/errors';
import { IndexedRouter } from '../../api/indexedRouter';
import { rateLimit } from '../../api/middleware/rateLimit';
import { startApi } from '../../api/server';
import { loadConfig } from '../../shared/config';

/**
 * One benchmark target per child process (argv[2]); prints `READY <port>` when listening.
 * The partial stacks reuse the real middleware functions in the real order, so the difference
 * between neighbours is what one layer costs.
 */
const BODY = { status: 'ok', version: '1.0.0', timestamp: '2026-01-01T00:00:00.000Z' };

async function listen(server: http.Server): Promise<void> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  process.stdout.write(`READY ${(server.address() as AddressInfo).port}\n`);
}

async function main(kind: string): Promise<void> {
  if (kind === 'node-http') {
    const payload = JSON.stringify(BODY);
    return listen(
      http.createServer((_req, res) => {
        res.writeHead(200, {
          'content-type': 'application/json; charset=utf-8',
          'content-length': Buffer.byteLength(payload),
        });
        res.end(payload);
      }),
    );
  }
  if (kind === 'koa') {
    const app = new Koa();
    app.use((ctx) => {
      ctx.body = BODY;
    });
    return listen(http.createServer(app.callback()));
  }
  // Everything else needs the real services (database, Redis, credential cache, rate limiter).
  const config = loadConfig({ ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent' });
  const api = await startApi(config, { port: 0 });
  if (kind === 'api') {
    process.stdout.write(`READY ${api.port}\n`);
    return;
  }
  const layers = kind.split('+'); // e.g. partial:errors+body+auth+ratelimit
  const app = new Koa();
  app.context.services = api.services;
  if (layers.includes('errors')) app.use(errorHandler(api.services.logger));
  if (layers.includes('body')) app.use(bodyParser());
  if (layers.includes('auth')) app.use(authenticate());
  if (layers.includes('ratelimit')) app.use(rateLimit(config));
  if (layers.includes('auth')) app.use(rejectFailedCredentials());
  const router = new IndexedRouter();
  router.get('/v1', (ctx) => {
    ctx.body = BODY;
  });
  app.use(router.routes());
  return listen(http.createServer(app.callback()));
}

process.on('SIGINT', () => process.exit(0));

main(process.argv[2]).catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
