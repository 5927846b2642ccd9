import test from 'ava';
import type { Knex } from 'knex';
import { MemberFilter, searchMembers } from '../../shared/queries/chat';
import { explainJson } from '../helpers/statements';
import { useStack } from '../helpers/stack';

/**
 * Filtered member lists of a large guild: a search reads its matches from the trigram indexes of
 * migration 20261206000100_chat_member_search, not by reading the guild.
 */
const stack = useStack(test);

type Plan = Record<string, unknown>;
const planNodes = (node: Plan): Plan[] => [node, ...((node.Plans as Plan[] | undefined) ?? []).flatMap(planNodes)];

/** Inserts a guild of `n` members (every 50th a bot, every 3rd with a global name, every 5th a nickname). */
async function guildOf(db: Knex, snowflake: string, n: number): Promise<string> {
  const [{ id }] = await db('chat_guilds').insert({ guild_id: snowflake, name: `guild ${snowflake}` }, ['id']);
  await db.raw(
    `INSERT INTO chat_members (guild_id, user_id, username, global_name, nickname, bot)
     SELECT ?::uuid, (5000000 + g)::text, 'member' || g,
            CASE WHEN g % 3 = 0 THEN 'Global ' || g END, CASE WHEN g % 5 = 0 THEN 'Nick ' || g END, g % 50 = 0
       FROM generate_series(1, ?::int) g`,
    [id, n],
  );
  // As autovacuum does after a sync: statistics, and the trigram indexes' pending entries merged
  // (until then the planner prices a search by index as the pending list's length).
  await db.raw('VACUUM ANALYZE chat_members');
  return id as string;
}

/** The page's statement (the one ordering chat_members) that reading `f` sends. */
async function statementOf(db: Knex, guild: string, f: MemberFilter) {
  const seen: Array<{ sql: string; bindings: unknown[] }> = [];
  const listener = (q: { sql: string; bindings: unknown[] }) => {
    if (/\bchat_members\b.*\border by\b/is.test(q.sql)) seen.push(q);
  };
  db.on('query', listener);
  try {
    await searchMembers(db, guild, f);
  } finally {
    db.off('query', listener);
  }
  if (seen.length !== 1) throw new Error(`expected one page statement on chat_members, saw ${seen.length}`);
  return seen[0];
}

test.serial('a member search reads its matches from the trigram indexes, never by scanning chat_members', async (t) => {
  const db = stack().db;
  const guild = await guildOf(db, '444444444444444401', 5000);
  const page = await searchMembers(db, guild, { search: 'ember123', limit: 50, offset: 0 });
  // member123 and member1230–member1239.
  t.is(page.total, 11);
  // Scans off: what remains is a read that needs no scan, or the only plan there is (a scan).
  const plan = JSON.parse(
    await explainJson(db, await statementOf(db, guild, { search: 'ember123', limit: 50, offset: 0 }), {
      settings: ['SET enable_seqscan = off'],
    }),
  ) as Array<{ Plan: Plan }>;
  const nodes = planNodes(plan[0].Plan);
  const onMembers = nodes.filter((n) => n['Relation Name'] === 'chat_members');
  t.true(onMembers.length > 0, 'the statement reads chat_members');
  for (const n of onMembers) {
    // A Seq Scan, or a walk of an index over the whole guild filtering by the search, reads every member.
    t.not(n['Node Type'], 'Seq Scan');
    t.notRegex(String(n.Filter ?? ''), /~~/, `${n['Node Type']} ${n['Index Name'] ?? ''} filters by the search`);
  }
  const probed = new Set(nodes.filter((n) => n['Node Type'] === 'Bitmap Index Scan').map((n) => n['Index Name']));
  for (const column of ['username', 'global_name', 'nickname'])
    t.true(probed.has(`chat_members_${column}_trgm`), `${column} is searched by its trigram index`);
});
