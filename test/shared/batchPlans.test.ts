import test from 'ava';
import type { Knex } from 'knex';
import { guildSettingsView } from '../../shared/commands/chatBotSettings';
import { twoFactorRequirement } from '../../shared/queries/twoFactor';
import { userView } from '../../shared/queries/users';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

/**
 * Reads batched per turn (one statement for every key asked for in the turn) must probe the tables
 * they look into once per key, by index. A correlated EXISTS may be planned as a hashed subplan
 * instead: one scan of the whole table, whatever the batch asks for, chosen once a batch holds a
 * dozen keys (the user view at 20 users and 10,000 bans: 5.6 ms against 0.4). Each read below sends
 * its statement for 20 keys, which is then explained with the same bindings.
 */
const stack = useStack(test);

function planNodes(node: Record<string, unknown>): Array<Record<string, unknown>> {
  const children = (node.Plans as Array<Record<string, unknown>> | undefined) ?? [];
  return [node, ...children.flatMap(planNodes)];
}

/** The plan nodes of the one statement matching `pattern` that `run` sends. */
async function planOf(db: Knex, pattern: RegExp, run: () => Promise<unknown>) {
  const seen: Array<{ sql: string; bindings: unknown[] }> = [];
  const listener = (q: { sql: string; bindings: unknown[] }) => {
    if (pattern.test(q.sql)) seen.push(q);
  };
  db.on('query', listener);
  try {
    await run();
  } finally {
    db.off('query', listener);
  }
  if (seen.length !== 1) throw new Error(`expected one statement matching ${pattern}, saw ${seen.length}`);
  const { rows } = await db.raw<{ rows: Array<{ 'QUERY PLAN': Array<{ Plan: Record<string, unknown> }> }> }>(
    `EXPLAIN (ANALYZE, FORMAT JSON) ${seen[0].sql.replace(/\$\d+/g, '?')}`,
    seen[0].bindings as never,
  );
  return planNodes(rows[0]['QUERY PLAN'][0].Plan);
}

/** Nodes that read all of `table`, or hash a subplan. */
const wholeTableReads = (nodes: Array<Record<string, unknown>>, table: string) =>
  nodes
    .filter(
      (n) =>
        (n['Relation Name'] === table && n['Node Type'] === 'Seq Scan') ||
        /hashed/i.test(String(n['Subplan Name'] ?? '')),
    )
    .map((n) => `${n['Node Type']} ${n['Relation Name'] ?? ''} ${n['Subplan Name'] ?? ''}`);

test.serial('user views, two-factor requirements and guild views probe per key, never scan the table', async (t) => {
  const db = stack().db;
  const users = await Promise.all(Array.from({ length: 20 }, () => createUser(db)));
  const ids = users.map((u) => u.id);
  // Many lifted bans and enrolments of other users, and guilds: a whole-table read is what the planner weighs.
  await db.raw(
    `INSERT INTO bans (user_id, reason, banned_at, unbanned_at)
     SELECT u, 'plan test', now() - interval '2 days', now() - interval '1 day'
       FROM unnest(?::uuid[]) u, generate_series(1, 200)`,
    [ids],
  );
  await db.raw(
    `WITH others AS (INSERT INTO users (username) SELECT 'plan_' || i FROM generate_series(1, 4000) i RETURNING id)
     INSERT INTO user_two_factor (user_id, secret_encrypted) SELECT id, 'x' FROM others`,
  );
  await db.raw(
    `INSERT INTO chat_guilds (guild_id, name) SELECT 'plan' || i, 'guild ' || i FROM generate_series(1, 4000) i`,
  );
  await db.raw('ANALYZE bans, user_two_factor, chat_guilds, users');

  const views = await planOf(db, /FROM "users" as "u"/i, () => Promise.all(ids.map((id) => userView(db, id))));
  t.deepEqual(wholeTableReads(views, 'bans'), []);
  t.true(
    views.some((n) => n['Relation Name'] === 'bans'),
    'the view reads bans',
  );

  const requirements = await planOf(db, /user_two_factor/, () =>
    Promise.all(ids.map((id) => twoFactorRequirement(db, id))),
  );
  t.deepEqual(wholeTableReads(requirements, 'user_two_factor'), []);

  const guilds = await planOf(db, /chat_guild_settings/, () =>
    Promise.all(Array.from({ length: 20 }, (_, i) => guildSettingsView(db, `plan${i * 7 + 1}`))),
  );
  t.deepEqual(wholeTableReads(guilds, 'chat_guilds'), []);
});
