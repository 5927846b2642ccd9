import test from 'ava';
import { chatAutoSync } from '../../shared/commands/chatAutoSync';
import { ChatBotProcess, startChatBot } from '../helpers/chatBot';
import { createKey, createUser, TestUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { lockWaiters } from '../helpers/wait';
import { ALPHA, alphaChannels, alphaMembers, BETA, fixture } from './fixtures';

// One stack, one bot at a time: the tests run in order and build on each other's syncs.
const stack = useStack(test, { realtime: 1 });

let admin: TestUser;
let mod: TestUser;
let plain: TestUser;
let bot: ChatBotProcess | undefined;

// Hooks run concurrently with useStack's: the users are made by the first test.
async function users(): Promise<void> {
  if (admin) return;
  const s = stack();
  admin = await createUser(s.db, { roles: ['role_admin'] });
  mod = await createUser(s.db, { roles: ['role_moderator'] });
  plain = await createUser(s.db, { roles: ['role_user'] });
}

test.after.always(async () => {
  await bot?.stop();
});

const alphaUuid = async () => (await stack().db('chat_guilds').where('guild_id', ALPHA).first()).id as string;

test.serial('without a connected bot a sync answers success false at once', async (t) => {
  const s = stack();
  await users();
  const started = Date.now();
  const r = await s.request('POST', '/v1/chat/sync', { token: mod.token, body: {} });
  t.is(r.status, 200);
  t.deepEqual(r.body, {
    success: false,
    error: 'no chat bot is connected',
    guilds_synced: 0,
    channels_synced: 0,
    roles_synced: 0,
  });
  t.true(Date.now() - started < 3000);
});

test.serial('access follows the chat permissions of spec §4.23', async (t) => {
  const s = stack();
  const uuid = '00000000-0000-4000-8000-000000000001';
  for (const [method, path] of [
    ['GET', '/v1/chat/guilds'],
    ['GET', `/v1/chat/guilds/${ALPHA}`],
    ['GET', '/v1/chat/settings'],
    ['PUT', '/v1/chat/settings'],
    ['POST', '/v1/chat/sync'],
    ['DELETE', `/v1/chat/guilds/${uuid}`],
    ['GET', `/v1/chat/guilds/${uuid}/members`],
    ['POST', `/v1/chat/guilds/${ALPHA}/members/sync`],
  ]) {
    const body = method === 'GET' || method === 'DELETE' ? undefined : {};
    t.is((await s.request(method, path, { token: plain.token, body })).status, 403, `${method} ${path}`);
    t.is((await s.request(method, path)).status, 401, `${method} ${path} anonymous`);
  }
  // The moderator reads, edits and syncs but may not delete (chat:delete).
  const del = await s.request('DELETE', `/v1/chat/guilds/${uuid}`, { token: mod.token });
  t.is(del.status, 403);
  t.regex(del.body.message, /chat:delete/);
  // An API key with chat:read reads, but cannot sync.
  const key = await createKey({ userId: admin.id, scopes: ['chat:read'] });
  t.is((await s.request('GET', '/v1/chat/guilds', { token: key.key })).status, 200);
  t.is((await s.request('POST', '/v1/chat/sync', { token: key.key, body: {} })).status, 403);
});

test.serial('the reference bot answers a guild sync: guilds, channels and roles stored', async (t) => {
  const s = stack();
  // The bot connects with an API key holding chat:sync (not only the system key).
  const key = await createKey({ userId: admin.id, scopes: ['chat:sync'] });
  bot = await startChatBot(s, fixture, { key: key.key });
  const r = await s.request('POST', '/v1/chat/sync', { token: mod.token, body: {} });
  t.deepEqual(r.body, { success: true, error: null, guilds_synced: 2, channels_synced: 4, roles_synced: 2 });
  t.truthy(bot.events.find((e) => e.event === 'request' && e.scope === 'CHAT_SYNC_SCOPE_GUILDS'));

  const list = await s.request('GET', '/v1/chat/guilds', { token: mod.token });
  t.is(list.status, 200);
  t.deepEqual(
    list.body.data.map((g: any) => g.guild_id),
    [ALPHA, BETA],
  );
  t.is(list.body._links.self, '/v1/chat/guilds');

  const g = await s.request('GET', `/v1/chat/guilds/${ALPHA}`, { token: mod.token });
  t.like(g.body, {
    guild_id: ALPHA,
    name: 'Alpha',
    icon: 'a_1c0n',
    icon_url: `https://cdn.discordapp.com/icons/${ALPHA}/a_1c0n.gif`,
    owner_id: '4001',
    member_count: 3,
    boost_count: 2,
    premium_tier: 1,
  });
  t.truthy(g.body.bot_joined_at);
  t.truthy(g.body.last_synced_at);
  t.is(g.body.id, await alphaUuid());
  const beta = await s.request('GET', `/v1/chat/guilds/${BETA}`, { token: mod.token });
  t.is(beta.body.icon_url, null);

  // The snowflake route refuses an internal UUID, and an unknown snowflake is a 404.
  t.is((await s.request('GET', `/v1/chat/guilds/${g.body.id}`, { token: mod.token })).status, 400);
  const missing = await s.request('GET', '/v1/chat/guilds/999', { token: mod.token });
  t.is(missing.status, 404);
  t.deepEqual(Object.keys(missing.body).sort(), ['error', 'message']);

  const channels = await s.request('GET', `/v1/chat/guilds/${ALPHA}/channels`, { token: mod.token });
  t.is(channels.status, 200);
  t.deepEqual(
    channels.body.data.map((c: any) => [c.channel_id, c.channel_type, c.channel_type_raw, c.is_text_based, c.is_voice]),
    [
      ['2003', 'Category', 4, false, false],
      ['2001', 'Text', 0, true, false],
      ['2002', 'Voice', 2, false, true],
      ['2004', 'Forum', 15, true, false],
    ],
  );
  t.like(channels.body.data[1], { guild_id: ALPHA, name: 'general', parent_id: '2003', topic: 'Hi', nsfw: false });

  const full = await s.request('GET', `/v1/chat/guilds/${g.body.id}/full`, { token: mod.token });
  t.is(full.status, 200);
  t.is(full.body.guild.guild_id, ALPHA);
  t.is(full.body.channels.length, 4);

  const roles = await s.db('chat_roles').orderBy('position', 'desc');
  t.deepEqual(
    roles.map((r) => [r.role_id, r.name, r.color]),
    [
      ['3001', 'Admin', 16711680],
      ['3002', 'Member', 0],
    ],
  );
});

test.serial('a member sync stores the members; search, filters and pagination', async (t) => {
  const s = stack();
  const r = await s.request('POST', `/v1/chat/guilds/${ALPHA}/members/sync`, { token: mod.token });
  t.deepEqual(r.body, { success: true, error: null, members_synced: 3 });
  const uuid = await alphaUuid();
  const members = (q = '') => s.request('GET', `/v1/chat/guilds/${uuid}/members${q}`, { token: mod.token });

  const all = await members();
  t.is(all.status, 200);
  t.is(all.body.total_count, 3);
  t.false(all.body.has_more);
  // By display name: Ally (nickname), bob (username), Helper Bot (global name).
  t.deepEqual(
    all.body.members.map((m: any) => m.display_name),
    ['Ally', 'bob', 'Helper Bot'],
  );

  const names = (b: any) => b.members.map((m: any) => m.username);
  t.deepEqual(names((await members('?search=ALLY')).body), ['alice']); // nickname, any case
  t.deepEqual(names((await members('?search=liddell')).body), ['alice']); // global name
  t.deepEqual(names((await members('?search=BO')).body), ['bob', 'helper']); // username and global name
  t.deepEqual(names((await members('?search=%25')).body), []); // LIKE wildcards are literal
  t.deepEqual(names((await members('?bot_only=true')).body), ['helper']);
  t.deepEqual(names((await members('?humans_only=true')).body), ['alice', 'bob']);
  t.deepEqual(names((await members('?has_role=3002')).body), ['alice', 'bob']);
  t.deepEqual(names((await members('?has_role=3001&humans_only=true')).body), ['alice']);

  const page1 = await members('?limit=2');
  t.deepEqual(names(page1.body), ['alice', 'bob']);
  t.is(page1.body.total_count, 3);
  t.true(page1.body.has_more);
  const page2 = await members('?limit=2&offset=2');
  t.deepEqual(names(page2.body), ['helper']);
  t.false(page2.body.has_more);
  const past = await members('?limit=2&offset=10');
  t.deepEqual(past.body, { members: [], total_count: 3, has_more: false });

  t.is((await members('?limit=101')).status, 400);
  t.regex((await members('?limit=0')).body.message, /limit/);
  t.regex((await members('?bot_only=maybe')).body.message, /bot_only/);
  t.regex((await members('?has_role=abc')).body.message, /has_role/);
  t.is((await s.request('GET', `/v1/chat/guilds/${ALPHA}/members`, { token: mod.token })).status, 400);
  t.is(
    (await s.request('GET', '/v1/chat/guilds/00000000-0000-4000-8000-000000000001/members', { token: mod.token }))
      .status,
    404,
  );

  const alice = await s.request('GET', `/v1/chat/guilds/${uuid}/members/4001`, { token: mod.token });
  t.is(alice.status, 200);
  t.like(alice.body, {
    guild_id: uuid,
    user_id: '4001',
    display_name: 'Ally',
    formatted_username: 'alice',
    is_timed_out: true,
    avatar_url: 'https://cdn.discordapp.com/avatars/4001/a_f00d.gif',
    joined_at: alphaMembers[0].joined_at,
    roles: ['3001', '3002'],
  });
  const bob = await s.request('GET', `/v1/chat/guilds/${uuid}/members/4002`, { token: mod.token });
  t.like(bob.body, {
    display_name: 'bob',
    formatted_username: 'bob#1234',
    is_timed_out: false,
    deaf: true,
    premium_since: '2024-03-01T00:00:00.000Z',
    avatar_url: 'https://cdn.discordapp.com/avatars/4002/b0b.png',
  });
  const helper = await s.request('GET', `/v1/chat/guilds/${uuid}/members/4003`, { token: mod.token });
  // A timeout in the past is over; no avatar hash, no URL.
  t.like(helper.body, { display_name: 'Helper Bot', is_timed_out: false, bot: true, avatar_url: null });
  t.is((await s.request('GET', `/v1/chat/guilds/${uuid}/members/4999`, { token: mod.token })).status, 404);
  // Asked together (one batched read): each answer is its own member, an unknown one 404.
  const together = await Promise.all(
    ['4001', '4002', '4999', '4003', '4001'].map((id) =>
      s.request('GET', `/v1/chat/guilds/${uuid.toUpperCase()}/members/${id}`, { token: mod.token }),
    ),
  );
  t.deepEqual(
    together.map((r) => (r.status === 200 ? r.body.user_id : r.status)),
    ['4001', '4002', 404, '4003', '4001'],
  );
  // An unknown guild's members cannot be synced.
  t.is((await s.request('POST', '/v1/chat/guilds/5/members/sync', { token: mod.token })).status, 404);
});

test.serial('what the bot no longer reports is removed; a deleted guild comes back at the next sync', async (t) => {
  const s = stack();
  await bot!.stop();
  // The bot left Beta, Alpha lost a channel and a member.
  const smaller = {
    guilds: [
      {
        ...fixture.guilds[0],
        name: 'Alpha renamed',
        channels: alphaChannels.filter((c) => c.channel_id !== '2004'),
        members: alphaMembers.filter((m) => m.user_id !== '4002'),
      },
    ],
  };
  bot = await startChatBot(s, smaller);
  const before = await alphaUuid();
  t.like((await s.request('POST', '/v1/chat/sync', { token: mod.token, body: {} })).body, {
    success: true,
    guilds_synced: 1,
    channels_synced: 3,
  });
  t.is((await s.request('GET', `/v1/chat/guilds/${BETA}`, { token: mod.token })).status, 404);
  t.is(await alphaUuid(), before, 'a guild keeps its internal id across syncs');
  t.is((await s.request('GET', `/v1/chat/guilds/${ALPHA}`, { token: mod.token })).body.name, 'Alpha renamed');
  const channels = await s.request('GET', `/v1/chat/guilds/${ALPHA}/channels`, { token: mod.token });
  t.false(channels.body.data.some((c: any) => c.channel_id === '2004'));
  t.like((await s.request('POST', `/v1/chat/guilds/${ALPHA}/members/sync`, { token: mod.token })).body, {
    success: true,
    members_synced: 2,
  });
  t.is((await s.request('GET', `/v1/chat/guilds/${before}/members/4002`, { token: mod.token })).status, 404);

  // A sync of one guild asks the bot for that guild only.
  t.like((await s.request('POST', '/v1/chat/sync', { token: mod.token, body: { guild_id: ALPHA } })).body, {
    success: true,
    guilds_synced: 1,
  });
  t.truthy(bot.events.find((e) => e.event === 'request' && e.guild_id === ALPHA));
  t.regex(
    (await s.request('POST', '/v1/chat/sync', { token: mod.token, body: { guild_id: 'x1' } })).body.message,
    /guild_id/,
  );

  // Delete by internal UUID (the snowflake is refused), 204; the guild's data goes with it.
  t.is((await s.request('DELETE', `/v1/chat/guilds/${ALPHA}`, { token: admin.token })).status, 400);
  t.is((await s.request('DELETE', `/v1/chat/guilds/${before}`, { token: admin.token })).status, 204);
  t.is((await s.request('GET', `/v1/chat/guilds/${ALPHA}`, { token: mod.token })).status, 404);
  t.is((await s.db('chat_members').where('guild_id', before)).length, 0);
  t.is((await s.request('DELETE', `/v1/chat/guilds/${before}`, { token: admin.token })).status, 404);
  const audit = await s.db('audit_events').where({ event_type: 'bot_guild_configured', resource_id: ALPHA }).first();
  t.like(audit, { actor_id: admin.id, metadata: { action: 'deleted', id: before } });
  // The bot is still in it: the next sync brings it back.
  await s.request('POST', '/v1/chat/sync', { token: mod.token, body: {} });
  const back = await s.request('GET', `/v1/chat/guilds/${ALPHA}`, { token: mod.token });
  t.is(back.status, 200);
  t.not(back.body.id, before);
});

test.serial('a guild sync waits for one being written, then writes its whole answer', async (t) => {
  const s = stack();
  // Two full syncs written guild by guild interleaved, each deleting what the other had just
  // written: 9 of 10 such pairs left a set neither bot answer had. A sync being written holds
  // this lock for its whole write; the test holds it as one would.
  const hold = await s.db.transaction();
  try {
    await hold.raw('SELECT pg_advisory_xact_lock(hashtext(?))', ['chat.guildSync']);
    const sync = s.request('POST', '/v1/chat/sync', { token: mod.token, body: {} });
    await lockWaiters(s.db, 1);
    await hold.commit();
    t.like((await sync).body, { success: true, guilds_synced: 1 });
  } finally {
    if (!hold.isCompleted()) await hold.rollback();
  }
  t.deepEqual(
    (await s.db('chat_guilds').select('guild_id')).map((g: { guild_id: string }) => g.guild_id),
    [ALPHA],
  );
});

test.serial('settings: global and per guild, validated, pushed to the bot', async (t) => {
  const s = stack();
  const get = await s.request('GET', '/v1/chat/settings', { token: mod.token });
  t.is(get.status, 200);
  // A UUID like every id of spec §2 (it was "1", the singleton row's key), the same on every read.
  t.regex(get.body.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  t.like(get.body, {
    auto_sync_enabled: true,
    sync_interval_seconds: 3600,
    initial_delay_seconds: 30,
    default_language: 'en',
    notify_on_guild_join: true,
    notify_on_guild_leave: true,
    command_cooldown_seconds: 3,
  });

  const bad = await s.request('PUT', '/v1/chat/settings', { token: mod.token, body: { sync_interval_seconds: 5 } });
  t.is(bad.status, 400);
  t.regex(bad.body.message, /sync_interval_seconds/);
  t.regex((await s.request('PUT', '/v1/chat/settings', { token: mod.token, body: {} })).body.message, /at least one/);
  const lang = await s.request('PUT', '/v1/chat/settings', { token: mod.token, body: { default_language: 'xx' } });
  t.is(lang.status, 400);
  t.regex(lang.body.message, /default_language/);
  // Named in details too, as a schema's refusal names its field.
  t.is(lang.body.details?.[0]?.field, 'default_language');
  t.regex(lang.body.details?.[0]?.message ?? '', /must be one of/);

  const put = await s.request('PUT', '/v1/chat/settings', {
    token: mod.token,
    body: { sync_interval_seconds: 120, default_language: 'de', command_cooldown_seconds: 0 },
  });
  t.deepEqual(put.body, { success: true });
  t.like((await s.request('GET', '/v1/chat/settings', { token: mod.token })).body, {
    sync_interval_seconds: 120,
    default_language: 'de',
    command_cooldown_seconds: 0,
    auto_sync_enabled: true,
  });
  // The bot hears of it as a ChatSettingsResponse (121) push.
  const pushed = await bot!.waitFor((e) => e.event === 'settings' && e.global?.syncIntervalSeconds === 120);
  t.like(pushed, { success: true, global: { id: get.body.id, defaultLanguage: 'de', commandCooldownSeconds: 0 } });

  // Per guild: null falls back to the global default.
  const path = `/v1/chat/guilds/${ALPHA}/settings`;
  t.deepEqual((await s.request('GET', path, { token: mod.token })).body, {
    guild_id: ALPHA,
    default_language: null,
    effective_language: 'de',
  });
  t.deepEqual((await s.request('PUT', path, { token: mod.token, body: { default_language: 'en' } })).body, {
    success: true,
  });
  t.deepEqual((await s.request('GET', path, { token: mod.token })).body, {
    guild_id: ALPHA,
    default_language: 'en',
    effective_language: 'en',
  });
  const guildPush = await bot!.waitFor((e) => e.event === 'settings' && e.guild?.guildId === ALPHA);
  t.like(guildPush.guild, { defaultLanguage: 'en', effectiveLanguage: 'en' });
  await s.request('PUT', path, { token: mod.token, body: { default_language: null } });
  t.is((await s.request('GET', path, { token: mod.token })).body.default_language, null);
  t.is((await s.request('PUT', path, { token: mod.token, body: {} })).status, 400);
  const unknownLanguage = await s.request('PUT', path, { token: mod.token, body: { default_language: 'xx' } });
  t.is(unknownLanguage.status, 400);
  t.regex(unknownLanguage.body.message, /^default_language: must be one of en, de/);
  t.is((await s.request('GET', '/v1/chat/guilds/12345/settings', { token: mod.token })).status, 404);
  t.is(
    (await s.request('PUT', '/v1/chat/guilds/12345/settings', { token: mod.token, body: { default_language: 'en' } }))
      .status,
    404,
  );
  t.is((await s.request('PUT', path, { token: plain.token, body: { default_language: 'en' } })).status, 403);
});

test.serial(
  'scheduled auto-sync follows auto_sync_enabled, initial_delay_seconds and sync_interval_seconds',
  async (t) => {
    const s = stack();
    const ctx = s.api.services;
    await s.db('chat_guilds').delete();
    await s.request('PUT', '/v1/chat/settings', {
      token: mod.token,
      body: { auto_sync_enabled: true, initial_delay_seconds: 20, sync_interval_seconds: 60 },
    });
    const t0 = Date.now();
    // The bot is first seen now: nothing before the initial delay.
    t.like(await chatAutoSync(ctx, t0), { synced: 0 });
    t.like(await chatAutoSync(ctx, t0 + 10_000), { synced: 0 });
    t.is((await s.db('chat_guilds')).length, 0);
    t.like(await chatAutoSync(ctx, t0 + 20_000), { synced: 1, guilds: 1, channels: 3, members: 2 });
    t.is((await s.db('chat_guilds')).length, 1);
    // Then once per interval.
    t.like(await chatAutoSync(ctx, t0 + 50_000), { synced: 0 });
    t.like(await chatAutoSync(ctx, t0 + 80_000), { synced: 1 });
    // Switched off: nothing, however late.
    await s.request('PUT', '/v1/chat/settings', { token: mod.token, body: { auto_sync_enabled: false } });
    t.like(await chatAutoSync(ctx, t0 + 500_000), { synced: 0 });
    // Without a bot: nothing either, and the initial delay starts again when one connects.
    await s.request('PUT', '/v1/chat/settings', { token: mod.token, body: { auto_sync_enabled: true } });
    await bot!.stop();
    bot = undefined;
    t.like(await chatAutoSync(ctx, t0 + 600_000), { synced: 0 });
    t.is(await s.redis.hexists(`${s.config.redisPrefix}chat:autosync`, 'botSeenAt'), 0);
  },
);

test.serial(
  'a bot answer with a NUL in a name fails the sync naming the field; a guild sent twice counts once',
  async (t) => {
    const s = stack();
    await users();
    await bot?.stop();
    const guild = fixture.guilds[0];
    bot = await startChatBot(s, {
      guilds: [
        { ...guild, name: 'Al\u0000pha', members: [{ ...alphaMembers[0], username: 'a\u0000b' }] },
        { ...fixture.guilds[1] },
      ],
    });
    const nul = await s.request('POST', '/v1/chat/sync', { token: mod.token, body: {} });
    t.is(nul.status, 200, nul.text);
    t.false(nul.body.success);
    t.regex(nul.body.error, /^the chat bot sent an invalid answer: guilds\[0\]\.name: must not contain NUL characters/);
    await bot.stop();

    // The same guild twice (the second with another name): stored once, counted once.
    bot = await startChatBot(s, { guilds: [guild, { ...guild, name: 'Alpha again' }] });
    const dup = await s.request('POST', '/v1/chat/sync', { token: mod.token, body: { guild_id: ALPHA } });
    t.is(dup.status, 200, dup.text);
    t.like(dup.body, { success: true, guilds_synced: 1 });
    t.is((await s.db('chat_guilds').where('guild_id', ALPHA)).length, 1);
    await bot.stop();

    // A member with a NUL in the member sync: the same, at its field.
    bot = await startChatBot(s, { guilds: [{ ...guild, members: [{ ...alphaMembers[0], username: 'a\u0000b' }] }] });
    const members = await s.request('POST', `/v1/chat/guilds/${ALPHA}/members/sync`, { token: mod.token, body: {} });
    t.is(members.status, 200, members.text);
    t.false(members.body.success);
    t.regex(members.body.error, /members\[0\]\.username: must not contain NUL characters/);
    await bot.stop();
    bot = undefined;
  },
);

test.serial(
  'a bot whose key just lost chat:sync, or was deleted, gets no request sent after the change answered',
  async (t) => {
    const s = stack();
    await users();
    await bot?.stop();
    const requests = (b: ChatBotProcess) => b.events.filter((e) => e.event === 'request').length;
    const noBot = { success: false, error: 'no chat bot is connected' };

    const narrowed = await createKey({ userId: admin.id, scopes: ['chat:sync', 'chat:read'] });
    bot = await startChatBot(s, fixture, { key: narrowed.key });
    t.like((await s.request('POST', '/v1/chat/sync', { token: mod.token, body: {} })).body, { success: true });
    const before = requests(bot);
    const patch = await s.request('PATCH', `/v1/api-keys/${narrowed.id}`, {
      token: admin.token,
      body: { scopes: ['chat:read'] },
    });
    t.is(patch.status, 200, patch.text);
    // At once: the bot is being re-checked, and the request waits for it rather than reach it.
    const started = Date.now();
    const after = await s.request('POST', '/v1/chat/sync', { token: mod.token, body: {} });
    t.like(after.body, noBot);
    t.true(Date.now() - started < 3000, `answered after ${Date.now() - started} ms`);
    await new Promise((r) => setTimeout(r, 300));
    t.is(requests(bot), before, JSON.stringify(bot.events.slice(-3)));
    await bot.stop();

    const deleted = await createKey({ userId: admin.id, scopes: ['chat:sync'] });
    bot = await startChatBot(s, fixture, { key: deleted.key });
    t.like((await s.request('POST', '/v1/chat/sync', { token: mod.token, body: {} })).body, { success: true });
    const beforeDelete = requests(bot);
    t.is((await s.request('DELETE', `/v1/api-keys/${deleted.id}`, { token: admin.token })).status, 204);
    const gone = await s.request('POST', '/v1/chat/sync', { token: mod.token, body: {} });
    t.like(gone.body, noBot);
    await new Promise((r) => setTimeout(r, 300));
    t.is(requests(bot), beforeDelete, JSON.stringify(bot.events.slice(-3)));
    await bot.stop();
    bot = undefined;
  },
);
