import test from 'ava';
import { createContext } from '../../shared/context';
import { afterCommit, transaction } from '../../shared/db';
import { captureLog, LogLine } from '../helpers/logCapture';
import { useStack } from '../helpers/stack';

/**
 * A push after a commit that Redis refuses (down) belongs to the Redis outage's folded log, not an
 * error line with a stack per request (a file of its own: a context sets the process's after-commit
 * reporter).
 */
const stack = useStack(test);

test('after-commit pushes refused by a Redis that is down are folded into the Redis outage lines', async (t) => {
  const lines: LogLine[] = [];
  // Nothing listens on port 1: the fail-fast connection refuses every command at once.
  const ctx = createContext({ ...stack().config, redisUrl: 'redis://127.0.0.1:1' }, 'api', captureLog(lines, 'api'));
  t.teardown(() => ctx.close());
  for (let i = 0; i < 5; i++)
    await transaction(ctx.db, async (trx) => {
      afterCommit(trx, () => ctx.redis.publish('nowhere', String(i)).then(() => undefined));
      await trx.raw('SELECT 1');
    });
  const failed = lines.filter((l) => l.msg === 'after-commit side effect failed');
  t.deepEqual(failed, [], 'no error line per hook');
  const folded = lines.filter((l) => l.msg === 'redis error' && l.connection === 'after-commit side effects');
  t.is(folded.length, 1, JSON.stringify(lines.map((l) => [l.msg, l.connection, l.err])));
  // Any other failure of a hook is still an error.
  await transaction(ctx.db, async (trx) => {
    afterCommit(trx, () => Promise.reject(new Error('a bug in a hook')));
    await trx.raw('SELECT 1');
  });
  t.is(lines.filter((l) => l.msg === 'after-commit side effect failed' && l.level === 50).length, 1);
});
