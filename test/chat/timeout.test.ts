import test from 'ava';
import { startChatBot } from '../helpers/chatBot';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { ALPHA, fixture } from './fixtures';

// Short timeouts by configuration (spec §8 defaults are 30 s and 60 s).
const stack = useStack(test, {
  realtime: 1,
  env: { CHAT_SYNC_TIMEOUT_SECONDS: '1', CHAT_MEMBER_SYNC_TIMEOUT_SECONDS: '2' },
});

test.serial('a bot that never answers (--silent): the syncs time out with success false', async (t) => {
  const s = stack();
  const mod = await createUser(s.db, { roles: ['role_moderator'] });
  // A guild to ask members of.
  await s.db('chat_guilds').insert({ guild_id: ALPHA, name: 'Alpha' });
  const bot = await startChatBot(s, fixture, { silent: true });
  try {
    let started = Date.now();
    const r = await s.request('POST', '/v1/chat/sync', { token: mod.token, body: {} });
    const took = Date.now() - started;
    t.deepEqual(r.body, {
      success: false,
      error: 'request timed out',
      guilds_synced: 0,
      channels_synced: 0,
      roles_synced: 0,
    });
    t.true(took >= 950 && took < 5000, `guild sync took ${took} ms`);
    t.truthy(bot.events.find((e) => e.event === 'request' && e.scope === 'CHAT_SYNC_SCOPE_GUILDS'));

    started = Date.now();
    const m = await s.request('POST', `/v1/chat/guilds/${ALPHA}/members/sync`, { token: mod.token });
    const tookMembers = Date.now() - started;
    t.deepEqual(m.body, { success: false, error: 'request timed out', members_synced: 0 });
    t.true(tookMembers >= 1950 && tookMembers < 6000, `member sync took ${tookMembers} ms`);
    // Nothing was written or removed.
    t.is((await s.db('chat_guilds')).length, 1);
  } finally {
    await bot.stop();
  }
});
