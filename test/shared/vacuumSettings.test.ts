import test from 'ava';
import { warnOnVacuumSettings } from '../../shared/schemaCheck';
import { captureLog, LogLine } from '../helpers/logCapture';
import { useStack } from '../helpers/stack';

/** What an operator reads off the database: the vacuum warning at the workers start, and who holds each connection. */
const stack = useStack(test);

test.serial('a churned table with autovacuum_enabled off is named, and the server setting is read', async (t) => {
  const db = stack().db;
  const server = (await db.raw(`SELECT current_setting('autovacuum') AS v`)).rows[0].v as string;
  const serverProblems = server === 'on' ? [] : ['autovacuum is off'];
  const run = async () => {
    const lines: LogLine[] = [];
    const problems = await warnOnVacuumSettings(db, captureLog(lines, 'workers'));
    return { problems, warned: lines.filter((l) => l.level === 40) };
  };
  const before = await run();
  t.deepEqual(before.problems, serverProblems);
  t.is(before.warned.length, serverProblems.length ? 1 : 0);

  // Every spelling of false PostgreSQL takes (it keeps the text as written).
  for (const value of ['false', 'off', '0', 'no']) {
    await db.raw(`ALTER TABLE side_effect_outbox SET (autovacuum_enabled = ${value})`);
    try {
      const off = await run();
      t.deepEqual(off.problems, [...serverProblems, 'autovacuum_enabled is false on side_effect_outbox'], value);
      t.is(off.warned.length, 1);
      t.regex(off.warned[0]!.msg, /autovacuum_enabled is false on side_effect_outbox/);
      t.regex(off.warned[0]!.msg, /turn autovacuum on/);
    } finally {
      await db.raw('ALTER TABLE side_effect_outbox RESET (autovacuum_enabled)');
    }
  }
  // Set on, it is no problem.
  await db.raw('ALTER TABLE side_effect_outbox SET (autovacuum_enabled = on)');
  t.deepEqual((await run()).problems, serverProblems);
  await db.raw('ALTER TABLE side_effect_outbox RESET (autovacuum_enabled)');
  t.deepEqual((await run()).problems, serverProblems);
});

test("the service's connections name their process in pg_stat_activity", async (t) => {
  const { rows } = await stack().api.services.db.raw(
    `SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()`,
  );
  t.is(rows[0].application_name, `api:${process.pid}`);
});
