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

test.serial('compactRowCounters deletes only rows that sum to 0, and no total changes', async (t) => {
  const s = stack();
  t.is(schedules.compactRowCounters, HOUR);
  const tag = randomUUID();
  const key = (name: string) => `gps_points_by_device:${tag}-${name}`;
  const rows: Array<[string, number, number]> = [
    // A device whose points are all gone: its rows sum to 0.
    [key('gone'), 3, 2],
    [key('gone'), 7, -2],
    [key('gone'), 9, 0],
    // Still counting: kept whole, even though two of its rows cancel out.
    [key('live'), 1, 5],
    [key('live'), 2, 1],
    [key('live'), 4, -1],
    // Sums to 0, but one row is locked by a writer in flight: the rest (+1) would not sum to 0.
    [key('busy'), 1, 1],
    [key('busy'), 2, -1],
    // Sums to 0 with a locked row that is 0 itself: the other two sum to 0 and go.
    [key('partly'), 1, 4],
    [key('partly'), 2, -4],
    [key('partly'), 5, 0],
  ];
  await s.db('row_counters').insert(rows.map(([counter, shard, n]) => ({ counter, shard, n })));
  const total = async (name: string) =>
    Number((await s.db('row_counters').where('counter', key(name)).sum({ n: 'n' }))[0].n ?? 0);
  const held = await s.db.transaction();
  try {
    await held.raw('SELECT 1 FROM row_counters WHERE (counter, shard) IN ((?, 2), (?, 5)) FOR UPDATE', [
      key('busy'),
      key('partly'),
    ]);
    const result = await scheduledTasks.compactRowCounters(s.api.services);
    t.true(result.deleted >= 5, JSON.stringify(result));
  } finally {
    await held.rollback();
  }
  const left = async (name: string) =>
    (await s.db('row_counters').where('counter', key(name)).orderBy('shard').pluck('shard')) as number[];
  t.deepEqual(await left('gone'), []);
  t.deepEqual(await left('live'), [1, 2, 4]);
  t.deepEqual(await left('busy'), [1, 2]);
  t.deepEqual(await left('partly'), [5]);
  for (const name of ['gone', 'live', 'busy', 'partly']) t.is(await total(name), name === 'live' ? 5 : 0, name);

  // A real device: points posted and deleted leave rows that sum to 0; compacted, the counter still
  // counts what comes next.
  const device = `${tag}-real`;
  const insert = (n: number) =>
    s.db.raw(
      `INSERT INTO gps_points (latitude, longitude, timestamp, speed_kmh, speed_mps, speed_mph, speed_knots, device_id)
       SELECT 1, 1, now(), 0, 0, 0, 0, ? FROM generate_series(1, ?::int)`,
      [device, n],
    );
  await insert(3);
  await s.db('gps_points').where('device_id', device).delete();
  t.true((await s.db('row_counters').where('counter', `gps_points_by_device:${device}`)).length > 0);
  await scheduledTasks.compactRowCounters(s.api.services);
  t.deepEqual(await s.db('row_counters').where('counter', `gps_points_by_device:${device}`), []);
  await insert(2);
  t.is(Number((await s.db('row_counters').where('counter', `gps_points_by_device:${device}`).sum({ n: 'n' }))[0].n), 2);
});
