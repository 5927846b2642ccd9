import test from 'ava';
import pino from 'pino';
import { Writable } from 'node:stream';
import type { ServiceContext } from '../../shared/context';
import { scheduledProcessor } from '../../workers/processors/scheduled';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

/** Runs one scheduled task with a logger that keeps its lines; returns them. */
async function logged(task: string): Promise<Array<{ level: number; msg: string; task: string }>> {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const logger = pino({ level: 'debug' }, sink);
  const ctx = { ...stack().api.services, logger } as unknown as ServiceContext;
  await scheduledProcessor({ data: { task } } as never, ctx as never);
  return lines.map((l) => JSON.parse(l));
}

test('a scheduled task that did nothing logs at debug; one that did something at info', async (t) => {
  const s = stack();
  // No stranded mail: { queued: 0, requeued: 0 } (this task runs every minute).
  const quiet = await logged('requeueEmails');
  t.deepEqual(
    quiet.map((l) => [l.msg, l.level]),
    [['scheduled task done', 20]],
  );
  // An audit event past its retention: the purge deletes it and says so at info.
  await s
    .db('system_config')
    .insert({ key: 'audit.retention_days', value: JSON.stringify(1) })
    .onConflict('key')
    .merge();
  await s.db('audit_events').insert({ event_type: 'login', created_at: new Date(Date.now() - 3 * 86_400_000) });
  try {
    const busy = await logged('purgeAuditEvents');
    t.deepEqual(
      busy.map((l) => [l.msg, l.level]),
      [['scheduled task done', 30]],
    );
  } finally {
    await s.db('system_config').where('key', 'audit.retention_days').delete();
  }
});
