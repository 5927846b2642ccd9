import test from 'ava';
import type { Knex } from 'knex';
import { MEMBER_COUNT_CAP, MemberFilter, searchMembers } from '../../shared/queries/chat';
import { createUser, TestUser } from '../helpers/factories';
import { explainJson, vacuumSettled } from '../helpers/statements';
import { useStack } from '../helpers/stack';

/**
 * Filtered member lists of a large guild: a search reads its matches from the trigram indexes of
 * migration 20261206000100_chat_member_search (not by reading the guild), and a filter's total is
 * counted up to MEMBER_COUNT_CAP, then estimated and flagged, so page 1 never reads every match.
 */
const stack = useStack(test);
let mod: TestUser;

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
  await vacuumSettled(db, 'chat_members');
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
  t.false(page.estimated);
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

test.serial('a filter counts its matches up to the cap, then estimates and says so', async (t) => {
  const s = stack();
  const db = s.db;
  mod = await createUser(db, { roles: ['role_moderator'] });
  const n = MEMBER_COUNT_CAP + 2000;
  const guild = await guildOf(db, '444444444444444402', n);
  const humans = n - Math.floor(n / 50);
  const get = (query: string) => s.request('GET', `/v1/chat/guilds/${guild}/members?${query}`, { token: mod.token });

  // More humans than the cap: page 1 says there are more, and gives an estimate (flagged).
  const first = await get('humans_only=true&limit=50');
  t.is(first.status, 200, first.text);
  t.is(first.headers.get('x-total-count-estimated'), 'true');
  t.true(first.body.total_count > MEMBER_COUNT_CAP, String(first.body.total_count));
  t.true(first.body.has_more);
  t.is(first.body.members.length, 50);
  // The cached copy of the answer keeps the flag.
  const again = await get('humans_only=true&limit=50');
  t.is(again.headers.get('x-total-count-estimated'), 'true');
  t.deepEqual(again.body, first.body);
  // The last page knows where the matches end: exact.
  const last = await get(`humans_only=true&limit=50&offset=${humans - 10}`);
  t.is(last.headers.get('x-total-count-estimated'), null);
  t.deepEqual([last.body.total_count, last.body.has_more, last.body.members.length], [humans, false, 10]);
  // Past the end: no more, an estimate no larger than the offset.
  const past = await get(`humans_only=true&limit=50&offset=${n}`);
  t.is(past.headers.get('x-total-count-estimated'), 'true');
  t.false(past.body.has_more);
  t.true(past.body.total_count > MEMBER_COUNT_CAP && past.body.total_count <= n, String(past.body.total_count));
  // Fewer matches than the cap: exact, unflagged.
  const bots = await get('bot_only=true&limit=50');
  t.is(bots.headers.get('x-total-count-estimated'), null);
  t.deepEqual([bots.body.total_count, bots.body.has_more], [Math.floor(n / 50), true]);

  // Page 1 reads no more rows than the cap's count and the page: no window over every match.
  const explained = await explainJson(db, await statementOf(db, guild, { humansOnly: true, limit: 50, offset: 0 }), {
    analyze: true,
  });
  const read = [...explained.matchAll(/"Actual Rows":(\d+)/g)].map((m) => Number(m[1]));
  t.true(Math.max(...read) <= MEMBER_COUNT_CAP + 1, `rows read: ${read.join(', ')}`);
});
