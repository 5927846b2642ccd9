import test from 'ava';
import { randomBytes, randomUUID } from 'node:crypto';
import { schedules } from '../../shared/queues';
import { scheduledTasks } from '../../workers/processors/scheduled';
import { useStack } from '../helpers/stack';

/** docs/workers.md "Scheduled tasks": cleanupAttemptCounters and cleanupAccountTokens. */
const stack = useStack(test);

const ago = (ms: number) => new Date(Date.now() - ms);
const ahead = (ms: number) => new Date(Date.now() + ms);
const HOUR = 3_600_000;

test('cleanupAttemptCounters deletes only counters whose window, cool-down and level have all ended', async (t) => {
  const s = stack();
  t.is(schedules.cleanupAttemptCounters, 15 * 60_000);
  const tag = randomUUID();
  const rows = {
    locked: { expires_at: ago(HOUR), locked_until: ahead(HOUR), level: 1, level_expires_at: ago(HOUR) },
    inWindow: { expires_at: ahead(HOUR), locked_until: null, level: 0, level_expires_at: null },
    levelLive: { expires_at: ago(HOUR), locked_until: ago(HOUR), level: 2, level_expires_at: ahead(HOUR) },
    ended: { expires_at: ago(HOUR), locked_until: ago(HOUR), level: 1, level_expires_at: ago(60_000) },
    endedWindowOnly: { expires_at: ago(1000), locked_until: null, level: 0, level_expires_at: null },
  };
  await s
    .db('attempt_counters')
    .insert(Object.entries(rows).map(([name, r]) => ({ key: `${tag}:${name}`, count: 3, ...r })));
  const result = await scheduledTasks.cleanupAttemptCounters(s.api.services);
  t.deepEqual(result, { deleted: 2 });
  const left = await s.db('attempt_counters').where('key', 'like', `${tag}:%`).orderBy('key').pluck('key');
  t.deepEqual(left, [`${tag}:inWindow`, `${tag}:levelLive`, `${tag}:locked`]);
});

test('cleanupAccountTokens deletes email-flow tokens a day past expiry, and only those', async (t) => {
  const s = stack();
  t.is(schedules.cleanupAccountTokens, 6 * HOUR);
  const token = (expires_at: Date, used_at: Date | null = null) => ({
    token_hash: randomBytes(32).toString('hex'),
    purpose: 'password_reset',
    email: `${randomUUID()}@example.test`,
    expires_at,
    used_at,
  });
  const [old] = await s.db('account_tokens').insert(token(ago(25 * HOUR)), ['id']);
  const [recent] = await s.db('account_tokens').insert(token(ago(23 * HOUR)), ['id']);
  const [used] = await s.db('account_tokens').insert(token(ago(23 * HOUR), ago(30 * HOUR)), ['id']);
  const [live] = await s.db('account_tokens').insert(token(ahead(HOUR)), ['id']);
  const result = await scheduledTasks.cleanupAccountTokens(s.api.services);
  t.deepEqual(result, { deleted: 1 });
  const left = await s.db('account_tokens').whereIn('id', [old.id, recent.id, used.id, live.id]).pluck('id');
  t.deepEqual(left.sort(), [recent.id, used.id, live.id].sort());
});
