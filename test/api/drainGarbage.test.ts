import test from 'ava';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const PROBE = path.resolve(__dirname, '../helpers/gcProbe.js');

/** Bytes promoted to the old generation per request, as test/helpers/gcProbe.ts measures them. */
async function promotedPerRequest(
  mode: 'tracked' | 'plain' | 'effects' | 'redis' | 'retain',
  requests = 20_000,
): Promise<number> {
  // The api's young generation (ecosystem.config.js) is not needed to show the effect; 16 MB is V8's default.
  const { stdout } = await run(process.execPath, ['--max-semi-space-size=16', PROBE, mode, String(requests)], {
    timeout: 60_000,
  });
  return (JSON.parse(stdout.trim()) as { promotedPerRequest: number }).promotedPerRequest;
}

// api/drain.ts once kept every open response in one Set. Churned on every request, V8's rehashed
// tables chained every later response to a promoted one, so each request's objects (response,
// request, headers, context) lived through scavenges: about 2 KB per request promoted here, and
// 25-35 ms scavenge pauses in the api under load. Answered requests must die young.
test.serial('answered keep-alive requests die young with the connection tracker on', async (t) => {
  const [retain, plain, tracked] = [
    await promotedPerRequest('retain'),
    await promotedPerRequest('plain'),
    await promotedPerRequest('tracked'),
  ];
  t.log(
    `promoted bytes per request: retain ${retain.toFixed(0)}, plain ${plain.toFixed(0)}, tracked ${tracked.toFixed(0)}`,
  );
  // The control: responses kept for half a second are promoted, and the probe sees it.
  t.true(retain > 1000, `the probe must see retained responses promoted (saw ${retain.toFixed(0)} B/request)`);
  t.true(plain < 300, `a bare server promotes ${plain.toFixed(0)} B/request`);
  t.true(
    tracked < 300,
    `with the connection tracker ${tracked.toFixed(0)} B/request were promoted (a bare server: ${plain.toFixed(0)})`,
  );
});

// zod 3 built each refinement's context with a getter over a fresh closure, which V8 kept alive
// through the next scavenge with the whole parse: shared/zod.ts parses refinements and transforms
// without it. Validating a request's input must not make its objects outlive the request.
test.serial('validating with refinements and transforms leaves nothing to promote', async (t) => {
  const effects = await promotedPerRequest('effects');
  t.log(`promoted bytes per request with a refinement and a transform: ${effects.toFixed(0)}`);
  t.true(effects < 300, `${effects.toFixed(0)} B/request were promoted`);
});

// Two things kept every Redis command of a request alive through scavenges until the next full GC,
// with its arguments and reply: shared/redis.ts once tracked the commands in flight in one Set
// (the trap above), and ioredis defined each pipeline's length as a getter over a closure, which V8
// keeps in an accessor pair in the old generation (patched: patches/ioredis+*.patch). Each probe
// request sends four commands and a pipeline on a fail-fast connection, as the rate limiter, the
// caches and the relay do. The unpatched pipeline fails this every time (3,500 B/request). The Set
// showed only with many commands in flight and only in some runs (sixteen commands a request:
// 12,300 B/request in one of three runs of 20,000 requests), so this does not guard it.
test.serial('Redis commands and pipelines of a request die young', async (t) => {
  // 10,000 requests show the pipeline's cost as well as 20,000, in half the time.
  const redis = await promotedPerRequest('redis', 10_000);
  t.log(`promoted bytes per request with a Redis command and a pipeline: ${redis.toFixed(0)}`);
  t.true(redis < 300, `${redis.toFixed(0)} B/request were promoted`);
});
