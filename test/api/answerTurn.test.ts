import test from 'ava';
import Koa from 'koa';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { END_OF_TURN_MAX_BYTES, endOfTurn } from '../../api/answerTurn';
import { errorHandler } from '../../api/middleware/errors';
import { createLogger } from '../../shared/logger';

/**
 * README "Hot paths", answers at the end of the turn: an answer finished without waiting is not
 * written at once, but with the other answers of its event-loop turn, after the turn's other work.
 */
async function serve(handler: Koa.Middleware): Promise<{ url: string; close(): void }> {
  const app = new Koa();
  app.silent = true;
  app.use(errorHandler(createLogger('answer-turn-test', 'silent')));
  app.use(handler);
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => server.close(),
  };
}

test('a small answer finished without waiting leaves after the work its turn scheduled, success or failure; a large one at once', async (t) => {
  const seen: Array<{ path: string; sentBeforeImmediate: boolean }> = [];
  const app = await serve((ctx) => {
    // Work of the same turn that runs after the I/O phase: the answer must not have left yet.
    setImmediate(() => seen.push({ path: ctx.path, sentBeforeImmediate: ctx.res.headersSent }));
    if (ctx.path === '/fail') throw new Error('boom');
    // A large answer's cost is its bytes: it is written at once.
    ctx.body = ctx.path === '/large' ? Buffer.alloc(END_OF_TURN_MAX_BYTES, 'a') : { ok: true };
  });
  try {
    const ok = await fetch(`${app.url}/ok`);
    t.is(ok.status, 200);
    t.deepEqual(await ok.json(), { ok: true });
    const failed = await fetch(`${app.url}/fail`);
    t.is(failed.status, 500);
    t.is(((await failed.json()) as { error: string }).error, 'InternalServerError');
    const large = await fetch(`${app.url}/large`);
    t.is((await large.arrayBuffer()).byteLength, END_OF_TURN_MAX_BYTES);
    t.deepEqual(seen, [
      { path: '/ok', sentBeforeImmediate: false },
      { path: '/fail', sentBeforeImmediate: false },
      { path: '/large', sentBeforeImmediate: true },
    ]);
  } finally {
    app.close();
  }
});

test('the requests of one turn share one end of turn; the next turn gets its own', async (t) => {
  const first = endOfTurn();
  t.is(endOfTurn(), first);
  let ended = false;
  void first.then(() => (ended = true));
  await Promise.resolve();
  t.false(ended, 'not before the turn ends');
  await first;
  const next = endOfTurn();
  t.not(next, first);
  await next;
});
