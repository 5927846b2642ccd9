import test from 'ava';
import { startChatBot } from '../helpers/chatBot';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { statementsOn } from '../helpers/statements';

const stack = useStack(test, { realtime: 1 });

const GUILDS = 40;
const JOINED = '2024-03-01T12:00:00.000Z';
/** The number of rows of `table`. */
const rows = async (table: string) => Number((await stack().db(table).count({ n: '*' }).first())!.n);
const snowflake = (n: number) => String(500_000_000_000_000_000n + BigInt(n));

/** Guild i with `channels` channels and `roles` roles (ids derived from i). */
function guild(i: number, opts: { channels?: number; roles?: number; joined?: string } = {}) {
  return {
    guild_id: snowflake(i),
    name: `Guild ${i}`,
    icon: null,
    owner_id: '4001',
    member_count: i,
    boost_count: 0,
    premium_tier: 0,
    ...(opts.joined ? { bot_joined_at: opts.joined } : {}),
    channels: Array.from({ length: opts.channels ?? 3 }, (_, c) => ({
      channel_id: snowflake(100_000 + i * 10 + c),
      name: `channel-${c}`,
      channel_type_raw: 0,
      position: c,
    })),
    roles: Array.from({ length: opts.roles ?? 2 }, (_, r) => ({
      role_id: snowflake(200_000 + i * 10 + r),
      name: `role-${r}`,
      position: r,
      color: 0,
    })),
    members: [],
  };
}

test.serial(
  'a guild sync costs the same few statements for 40 guilds; a re-sync updates, keeps and removes',
  async (t) => {
    const s = stack();
    const mod = await createUser(s.db, { roles: ['role_moderator'] });
    const first = Array.from({ length: GUILDS }, (_, i) => guild(i, i === 0 ? { joined: JOINED } : {}));
    let bot = await startChatBot(s, { guilds: first });
    const sync = () => s.request('POST', '/v1/chat/sync', { token: mod.token, body: {} });
    try {
      const one = await statementsOn(s.db, 'chat_(guilds|channels|roles)', sync);
      t.deepEqual(one.result.body, {
        success: true,
        error: null,
        guilds_synced: GUILDS,
        channels_synced: GUILDS * 3,
        roles_synced: GUILDS * 2,
      });
      // Guilds, channels, roles, the two clean-ups and the guilds the bot left: not one per guild.
      t.true(one.count <= 6, `${one.count} statements for ${GUILDS} guilds: ${one.sql.join('\n')}`);
      t.is(await rows('chat_guilds'), GUILDS);
      t.is(await rows('chat_channels'), GUILDS * 3);
      t.is(await rows('chat_roles'), GUILDS * 2);
      const g0 = await s.db('chat_guilds').where('guild_id', snowflake(0)).first();
      t.is(g0.bot_joined_at.toISOString(), JOINED);
      const g1 = await s.db('chat_guilds').where('guild_id', snowflake(1)).first();
      t.truthy(g1.bot_joined_at, 'a guild the bot sends no join time for joined now');

      await bot.stop();
      // The bot left the last guild, joined a new one, sends no join time for guild 0 (kept), and
      // guild 1 lost a channel and a role.
      const second = [
        guild(0),
        guild(1, { channels: 2, roles: 1 }),
        ...first.slice(2, GUILDS - 1),
        guild(GUILDS, { channels: 1, roles: 0 }),
      ];
      bot = await startChatBot(s, { guilds: second });
      const two = await statementsOn(s.db, 'chat_(guilds|channels|roles)', sync);
      t.like(two.result.body, { success: true, guilds_synced: GUILDS, channels_synced: 3 + 2 + (GUILDS - 3) * 3 + 1 });
      t.true(two.count <= 6, `${two.count} statements for ${GUILDS} guilds`);
      const ids = await s.db('chat_guilds').orderBy('member_count').pluck('guild_id');
      t.deepEqual(ids, [...Array.from({ length: GUILDS - 1 }, (_, i) => snowflake(i)), snowflake(GUILDS)]);
      t.is((await s.db('chat_guilds').where('guild_id', snowflake(0)).first()).bot_joined_at.toISOString(), JOINED);
      const uuidOf = async (i: number) => (await s.db('chat_guilds').where('guild_id', snowflake(i)).first()).id;
      t.deepEqual(
        await s
          .db('chat_channels')
          .where('guild_id', await uuidOf(1))
          .orderBy('position')
          .pluck('name'),
        ['channel-0', 'channel-1'],
      );
      t.deepEqual(
        await s
          .db('chat_roles')
          .where('guild_id', await uuidOf(1))
          .pluck('name'),
        ['role-0'],
      );
      t.is(await rows('chat_channels'), 3 + 2 + (GUILDS - 3) * 3 + 1);
      // The guild the bot left went with its channels and roles (ON DELETE CASCADE).
      t.is(await rows('chat_roles'), 2 + 1 + (GUILDS - 3) * 2);
    } finally {
      await bot.stop();
    }
  },
);
