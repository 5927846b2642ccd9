import test from 'ava';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { deleteKeysWithPrefix, runRedisPrefix } from '../helpers/stack';

// A request waiting on a job (the data export) stops waiting when the process drains, when its
// queues close or when its timeout passes; whichever ends it, nothing of the wait may keep the
// process alive. Each case runs in a process of its own with no worker for the job, and must
// exit by itself once it has closed its queues and its connection.

const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const QUEUES = path.resolve(__dirname, '../../shared/queues');
const prefix = `${runRedisPrefix()}qw${randomBytes(4).toString('hex')}:`;
test.after.always(() => deleteKeysWithPrefix(REDIS_URL, prefix));

/** How the wait ends in the child: the drain's abort, close() alone, or its own timeout. */
type Ending = 'abort' | 'close' | 'timeout';

const child = (ending: Ending) => `
const Redis = require('ioredis');
const { Queues } = require(${JSON.stringify(QUEUES)});
const connection = new Redis(${JSON.stringify(REDIS_URL)}, { maxRetriesPerRequest: 1 });
const waitsEnd = new AbortController();
const queues = new Queues(connection, { redisPrefix: ${JSON.stringify(prefix)} }, undefined, waitsEnd.signal);
const started = Date.now();
const timeoutMs = ${ending === 'timeout' ? 300 : 60_000};
const finish = async () => { await queues.close(); connection.disconnect(); };
queues.enqueueAndWait('dataExport', { userId: 'nobody' }, timeoutMs).then(
  () => console.log('resolved'),
  (err) => { console.log(JSON.stringify({ name: err.name, message: err.message, ms: Date.now() - started })); if (${ending === 'timeout'}) finish(); },
);
if (${ending !== 'timeout'}) setTimeout(() => { ${ending === 'abort' ? 'waitsEnd.abort();' : ''} finish(); }, 500);
`;

/** Runs the child; its output and how long it took to exit (killed after 20 s). */
function run(ending: Ending): Promise<{ out: string; exitMs: number; killed: boolean }> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(process.execPath, ['-e', child(ending)], { timeout: 20_000, encoding: 'utf8' }, (err, stdout) =>
      resolve({ out: stdout, exitMs: Date.now() - started, killed: Boolean(err && err.killed) }),
    );
  });
}

for (const ending of ['abort', 'close', 'timeout'] as const) {
  test(`a job wait ended by ${ending === 'timeout' ? 'its timeout' : ending === 'abort' ? 'the drain' : 'closing the queues'} leaves nothing that holds the process`, async (t) => {
    const r = await run(ending);
    t.false(r.killed, `the process was still alive 20 s later (a 60 s timer of the wait?): ${r.out}`);
    const line = r.out.trim().split('\n').pop() ?? '';
    const result = JSON.parse(line) as { name: string; message: string; ms: number };
    t.is(result.name, 'TimeoutError');
    if (ending === 'timeout') {
      t.regex(result.message, /did not finish within 300 ms/);
      t.true(result.ms >= 290, `rejected after ${result.ms} ms`);
    } else t.regex(result.message, /shutting down/);
    t.true(r.exitMs < 15_000, `exited after ${r.exitMs} ms`);
  });
}
