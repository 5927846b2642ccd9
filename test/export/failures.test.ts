import test from 'ava';
import { QueueName } from '../../shared/queues';
import { redisKey, RedisKeys } from '../../shared/redis';
import { createUser } from '../helpers/factories';
import { startStack, Stack } from '../helpers/stack';

// Two stacks of their own: one whose Chromium cannot start (every attempt fails → 500), one with no
// worker at all and a short timeout (→ 503).
let broken: Stack | undefined;
let idle: Stack | undefined;

test.before(async () => {
  [broken, idle] = await Promise.all([
    startStack({ workers: true, env: { CHROMIUM_PATH: '/bin/false' } }),
    startStack({ env: { EXPORT_TIMEOUT_MS: '700' } }),
  ]);
});
test.after.always(async () => {
  await Promise.all([broken?.close(), idle?.close()]);
});

/** What the user's hourly export window counts now (the limit counts exports received). */
async function exportsCounted(s: Stack, userId: string): Promise<number> {
  const window = Math.floor(Date.now() / 3_600_000);
  return Number((await s.redis.get(redisKey(s.config, RedisKeys.exportRate(userId, window)))) ?? 0);
}

test('generation failure: 500 {error, message}, audited as a failed data_exported, nothing logged as exported', async (t) => {
  const s = broken!;
  const user = await createUser(s.db);
  const r = await s.request('GET', '/v1/user/export', { token: user.token });
  t.is(r.status, 500);
  t.deepEqual(r.body, { error: 'InternalServerError', message: 'the data export could not be generated' });
  const audit = await s.db('audit_events').where({ user_id: user.id, event_type: 'data_exported' });
  t.is(audit.length, 1);
  t.is(audit[0].status, 'failure');
  // The user's own activity log names the failure, not the worker's error text (a path, here).
  t.is(audit[0].error_message, 'generation failed');
  t.is((await s.db('export_logs').where('user_id', user.id)).length, 0);
  // The failed job does not block the next request: it runs (and fails) again.
  t.is((await s.request('GET', '/v1/user/export', { token: user.token })).status, 500);
  const failed = (await s.workers!.ctx.queues.queue(QueueName.dataExport).getJobs(['failed'])).filter(
    (j) => j.data.userId === user.id,
  );
  t.is(failed.length, 2);
  t.true(failed.every((j) => j.attemptsMade === 3));
  // Neither failure used up one of the user's hourly exports.
  t.is(await exportsCounted(s, user.id), 0);
});

test('no result within EXPORT_TIMEOUT_MS: 503 with Retry-After, never a hung request', async (t) => {
  const s = idle!;
  const user = await createUser(s.db);
  const started = Date.now();
  const r = await s.request('GET', '/v1/user/export', { token: user.token });
  t.is(r.status, 503);
  t.is(r.body.error, 'ServiceUnavailable');
  t.truthy(r.body.message);
  t.truthy(r.headers.get('retry-after'));
  t.true(Date.now() - started < 5000);
  const audit = await s.db('audit_events').where({ user_id: user.id, event_type: 'data_exported' });
  t.is(audit[0]?.status, 'failure');
  // Its job still waits to run: the request stays counted, so timeouts cannot start work without bound.
  t.is(await exportsCounted(s, user.id), 1);
});
