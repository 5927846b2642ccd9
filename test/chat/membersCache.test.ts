import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { statementsOn } from '../helpers/statements';

/**
 * README "Hot paths" (response cache, answers about time): a page of a guild's members is answered
 * from a per-process copy while chat_guilds and chat_members are unchanged, and only until the
 * first running timeout on it ends, when `is_timed_out` changes with no write at all.
 */
const stack = useStack(test);

interface Member {
  username: string;
  display_name: string;
  is_timed_out: boolean;
}

test.serial("a cached page of members follows writes, and a member's timeout ending with no write", async (t) => {
  const s = stack();
  const mod = await createUser(s.db, { roles: ['role_moderator'] });
  const [guild] = await s.db('chat_guilds').insert({ guild_id: '700000000000000001', name: 'Cached' }).returning('id');
  const ends = Date.now() + 2000;
  await s.db('chat_members').insert([
    {
      guild_id: guild.id,
      user_id: '700000000000000011',
      username: 'alpha',
      communication_disabled_until: new Date(ends),
    },
    { guild_id: guild.id, user_id: '700000000000000012', username: 'beta' },
  ]);
  const url = `${s.url}/v1/chat/guilds/${guild.id}/members`;
  const page = async () => {
    const r = await fetch(url, { headers: { authorization: `Bearer ${mod.token}` } });
    t.is(r.status, 200);
    const body = (await r.json()) as { members: Member[]; total_count: number };
    return { etag: r.headers.get('etag'), total: body.total_count, members: body.members };
  };
  const byName = (p: { members: Member[] }, name: string) => p.members.find((m) => m.username === name)!;

  const first = await page();
  t.is(first.total, 2);
  t.true(byName(first, 'alpha').is_timed_out);
  t.truthy(first.etag);

  // A repeat while nothing changed and the timeout runs: no member is read.
  const repeat = await statementsOn(s.db, 'chat_members', page);
  t.is(repeat.count, 0, repeat.sql.join('\n'));
  t.deepEqual(repeat.result, first);

  // The timeout ends; nothing is written, yet the next answer says so, with a new ETag.
  await new Promise((r) => setTimeout(r, Math.max(0, ends - Date.now()) + 50));
  const ended = await page();
  t.false(byName(ended, 'alpha').is_timed_out);
  t.not(ended.etag, first.etag);
  // No timeout left on the page: it is cached again.
  t.is((await statementsOn(s.db, 'chat_members', page)).count, 0);

  // A write typed into the database is seen on the next request.
  await s.db('chat_members').where('username', 'beta').update({ nickname: 'Beta Renamed' });
  t.is(byName(await page(), 'beta').display_name, 'Beta Renamed');
  // So is the guild's deletion (its members go with it).
  await s.db('chat_guilds').where('id', guild.id).delete();
  t.is((await fetch(url, { headers: { authorization: `Bearer ${mod.token}` } })).status, 404);
});
