/** Chat bot fixtures (decisions.md format) shared by the chat tests. */

export const ALPHA = '111111111111111111';
export const BETA = '222222222222222222';
export const FUTURE = new Date(Date.now() + 24 * 3600_000).toISOString();

export const alphaChannels = [
  {
    channel_id: '2001',
    name: 'general',
    channel_type_raw: 0,
    parent_id: '2003',
    position: 1,
    topic: 'Hi',
    nsfw: false,
  },
  { channel_id: '2002', name: 'Lounge', channel_type_raw: 2, parent_id: '2003', position: 2, topic: null, nsfw: false },
  { channel_id: '2003', name: 'Main', channel_type_raw: 4, parent_id: null, position: 0, topic: null, nsfw: false },
  { channel_id: '2004', name: 'ideas', channel_type_raw: 15, parent_id: '2003', position: 3, topic: null, nsfw: true },
];

export const alphaMembers = [
  {
    user_id: '4001',
    username: 'alice',
    discriminator: '0',
    global_name: 'Alice Liddell',
    nickname: 'Ally',
    avatar: 'a_f00d',
    bot: false,
    system: false,
    joined_at: '2024-01-02T03:04:05.000Z',
    premium_since: null,
    deaf: false,
    mute: false,
    pending: false,
    communication_disabled_until: FUTURE,
    roles: ['3001', '3002'],
  },
  {
    user_id: '4002',
    username: 'bob',
    discriminator: '1234',
    global_name: null,
    nickname: null,
    avatar: 'b0b',
    bot: false,
    system: false,
    joined_at: '2024-02-01T00:00:00.000Z',
    premium_since: '2024-03-01T00:00:00.000Z',
    deaf: true,
    mute: false,
    pending: false,
    communication_disabled_until: null,
    roles: ['3002'],
  },
  {
    user_id: '4003',
    username: 'helper',
    discriminator: '0',
    global_name: 'Helper Bot',
    nickname: null,
    avatar: null,
    bot: true,
    system: false,
    joined_at: null,
    premium_since: null,
    deaf: false,
    mute: false,
    pending: false,
    communication_disabled_until: '2020-01-01T00:00:00.000Z',
    roles: [],
  },
];

export const fixture = {
  guilds: [
    {
      guild_id: ALPHA,
      name: 'Alpha',
      icon: 'a_1c0n',
      owner_id: '4001',
      member_count: 3,
      boost_count: 2,
      premium_tier: 1,
      channels: alphaChannels,
      roles: [
        { role_id: '3001', name: 'Admin', position: 2, color: 16711680 },
        { role_id: '3002', name: 'Member', position: 1, color: 0 },
      ],
      members: alphaMembers,
    },
    {
      guild_id: BETA,
      name: 'beta',
      icon: null,
      owner_id: '4002',
      member_count: 0,
      boost_count: 0,
      premium_tier: 0,
      channels: [],
      roles: [],
      members: [],
    },
  ],
};
